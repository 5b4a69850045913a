"""Sharded parameters: DTensors across torch.distributed ranks, folded rank by rank into the very
Summary the engine builds, so every check runs unchanged on the whole parameter.

* `harness.sharded.layout` — which box of the tensor each rank holds (plain arithmetic);
* `harness.sharded.part_fold` — the per-rank fold (`PartFold`) and what only sharding can break
  (`ShardingStats`);
* `harness.sharded.mesh` — the rank's side of a draw: DeviceMesh, DTensor parameter, calls;
* `harness.sharded.ranks` — the rank processes and their pools (deadlines, kills);
* `harness.sharded.dtensor_runner` — `ShardedCaseRunner`, the CaseRunner of a sharded group.

A layer between the candidates and the engine's checks: it imports `harness.runner` and below,
never the plugin.

May import: `harness.runner` and the floors below it, `reference`, `candidates`, `record`.
"""
