"""What a failure means: its mechanism from the catalog (`harness.diagnosis.catalog`).

May import: `harness.checks`, `harness.families`, `harness.engine` and the floors below them,
`reference`.
"""
