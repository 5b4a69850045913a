"""How far a failure moves the values and how much that matters: `severity` (the figures of a
Summary against its law, with their noise floors at the run's n) and `levels` (`level_of`:
harmful, fine or api, with the thresholds).

May import: `harness.checks`, `harness.families`, `harness.engine` and the floors below them,
`reference`; nothing else of `harness.diagnosis`.
"""
