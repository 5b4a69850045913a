"""Spreading the grid's case groups: what a group is and that it stays whole (`group_ledger`), which xdist worker runs it
(`scheduling`: case groups whole, CUDA groups on their device's workers) and which CI job runs it
(`partition`: deterministic partitions of the grid).

May import: `harness.runner` and the floors below it, `record`.
"""
