"""How far a failure moves the values and how much that matters: `severity` (the figures of a
Summary against its law, with their noise floors at the run's n), `effects` (effect sizes with
confidence bounds), `thresholds` (`HarmThresholds`: how far each may go) and `levels`
(`level_of`, `grade`: harmful, fine, undetermined or api).

May import: `harness.checks`, `harness.families`, `harness.engine` and the floors below them,
`reference`; nothing else of `harness.diagnosis`.
"""
