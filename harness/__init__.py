"""The machinery between a candidate and a verdict: cases and profiles, seeds, the streaming engine,
the Summary it folds samples into, and the checks that compare a Summary with the reference law.

Usable without pytest: `harness.run.run_case` runs every check of one case and returns Results.
"""
