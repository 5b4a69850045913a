"""Reproduce lines: the one command that reruns a check on exactly the streams of a row.

A row's line names the candidate, the case (by id, or as data for a case the grid does not hold),
the dtype, the device, the seed, the profile and every option that is not the default
(`harness.runner.RunConfig`'s; of the harm thresholds, those not at their default, so the rerun
grades the row at the same level), the layout of a sharded group, and the check's test; a line
with no check (a shrunk boundary) reruns every check of its group.
"""

from __future__ import annotations

import shlex

from record.ids import DEFAULT_PATH
from reference.dtypes import dtype_name

from ..checks import CHECKS
from .options import RUN_DEFAULTS


def threshold_number(value: float) -> str:
    """A threshold as the option's text takes it back unchanged: '0.05', '1e-05', 'inf'."""
    text = f"{value:g}"
    return text if float(text) == value else repr(value)


def changed_thresholds(thresholds) -> str:
    """``--harm-thresholds`` text for the thresholds of `thresholds` (a `HarmThresholds`) that
    are not the defaults ("" where none is): 'moved@0.5=0.05,tail@64=1e-06'."""
    defaults = RUN_DEFAULTS.harm_thresholds.as_dict()
    return ",".join(f"{key}={threshold_number(value)}"
                    for key, value in thresholds.as_dict().items() if value != defaults[key])


class ReproLines:
    """Builds the reproduce lines of one run: `config` is its `RunConfig` as it stands (a
    --budget-seconds run sets each case's budget after collection, and this with it),
    `world_sizes` its world sizes, and `cases` its cases by id."""

    def __init__(self, config, world_sizes: tuple, cases: dict):
        self.config = config
        self.world_sizes = tuple(world_sizes)
        self.cases = dict(cases)

    def line(self, candidate, drawn, dtype, device, check: str | None,
             samples: int | None = None, layout=None, spec: str | None = None,
             alpha_fail: float | None = None) -> str:
        """The one command that reruns `check` (None: every check) on exactly these streams.
        `drawn`: the group's `Case` (None for an API group). `samples`: the n stage 1 drew, where
        a budget was in force (a budget stops at a time that depends on the machine; an explicit
        --samples is drawn in full, so the rerun draws the same n). `spec`: a case given as data
        (a shrunk boundary), instead of `drawn`."""
        cfg = self.config
        parts = ["pytest", "suites", "--candidate", candidate.spec]
        # The run's own case of that id (a case on the shape axis or on a path is named by its
        # label, which the run derives from its base case).
        case = self.cases.get(drawn.id) if drawn is not None else None
        if spec is not None:
            parts += ["--case", spec]
        elif case is not None and case.spec:
            parts += ["--case", case.spec]
            if not case.own_shape:
                parts += ["--shapes", "none", "--paths", "eager"]  # this group only
        elif drawn is not None:
            parts += ["--cases", drawn.id]
            if not drawn.shape_class and drawn.path == DEFAULT_PATH and layout is None:
                parts += ["--shapes", "none", "--paths", "eager"]  # this group only
        parts += ["--dtypes", dtype_name(dtype), "--devices", device, "--seed", str(cfg.run_seed),
                  "--profile", cfg.profile]
        if layout is not None:
            parts += ["--world-sizes", str(layout.world_size), "--placements", layout.placement]
            if layout.rank_seeds != "same":
                parts += ["--rank-seeds", layout.rank_seeds]
        elif drawn is not None and self.world_sizes != (1,):
            parts += ["--world-sizes", "1"]
        samples = samples or cfg.samples
        if samples:
            parts += ["--samples", str(samples)]
        if cfg.bounds != "rounded":
            parts += ["--bounds", cfg.bounds]
        if alpha_fail is None:
            alpha_fail = (case.alpha_fail if case is not None and case.alpha_fail is not None
                          else cfg.alpha_fail)
        for flag, value, default in (
                ("--case-timeout", cfg.case_timeout, RUN_DEFAULTS.case_timeout),
                ("--alpha-suspect", cfg.alpha_suspect, RUN_DEFAULTS.alpha_suspect),
                ("--alpha-fail", alpha_fail, RUN_DEFAULTS.alpha_fail)):
            if value != default:
                parts += [flag, f"{value:g}"]
        changed = changed_thresholds(cfg.harm_thresholds)
        if changed:
            parts += ["--harm-thresholds", changed]
        if check is not None:
            parts += ["-k", CHECKS[check].test_name]
        return " ".join(shlex.quote(p) for p in parts)
