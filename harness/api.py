"""The Python API: the rows of `pytest suites` as a DataFrame, without pytest, and the exact law.

    import harness
    df = harness.check("torch", cases=["abs-bounds-trap"], dtypes=["bfloat16"], profile="smoke")
    df[df.verdict == "fail"][["case", "dtype", "check", "message"]]

    law = harness.law("normal-2sigma", "bfloat16")   # what a perfect sampler writes
    law.rn_a, law.atom_a                             # the lower bound as written, and its mass

`check` builds its session in the steps the pytest plugin takes (`harness.session.planner.plan_run`:
resolve the candidates, plan the run; then the session opens its sink) and drives the very
`HarnessSession` the plugin drives: the same options, the same groups in the same order, the same
seeds, the same rows. The session runs every group in this process, one after the other (no
xdist: `HarnessSession.run_in_process`): a candidate that kills its process takes the caller with
it, so run untrusted samplers through ``pytest suites -n 1`` instead.
"""

from __future__ import annotations

import time
import warnings

import pandas as pd
import torch

from record.store import results_frame
from reference import TruncatedNormal, rounded_law
from reference.dtypes import DTYPES, torch_dtype

from .cases import Case, case_by_id
from .session.options import RUN_DEFAULTS, OptionError, option_defaults, parse_options
from .session.planner import plan_run
from .session.sink import REPORT_WRITE_FAILED

__all__ = ["check", "law", "OptionError"]

#: Options `check` names itself (the command line's --candidate, --cases, --dtypes, ...).
NAMED = ("candidate", "cases", "dtypes", "devices", "profile", "seed", "report_dir")
#: Keyword options of `check` beyond the named ones, as the command line spells them without
#: the dashes: name -> the default `pytest suites` uses (`harness.session.options.option_defaults`).
OPTIONS = {name: tuple(default) if isinstance(default, list) else default
           for name, default in option_defaults(tuple(DTYPES)).items() if name not in NAMED}
#: Former names of options, still taken: the grid's partitions were called shards.
OPTION_ALIASES = {"shard_id": "partition_id", "num_shards": "num_partitions"}


def _items(value) -> list | None:
    """A list option's items, as given: names, `Case`s, torch dtypes (`parse_options` takes
    each typed, as it takes the command line's text)."""
    if value is None:
        return None
    return [value] if isinstance(value, (str, Case, torch.dtype)) else list(value)


def _candidates(candidate) -> list:
    """Specs (or Candidate objects) from a spec, a Candidate, a callable, or a list of them."""
    from candidates import Candidate

    if candidate is None:
        return []  # the default: torch, or each recorded call's own sampler
    items = candidate if isinstance(candidate, (list, tuple)) else [candidate]
    out = []
    for item in items:
        if isinstance(item, (str, Candidate)):
            out.append(item)
        elif callable(item):
            module, name = getattr(item, "__module__", None), getattr(item, "__qualname__", None)
            spec = f"{module}:{name}" if module and name and module != "__main__" else None
            out.append(Candidate(item, spec=spec, name=getattr(item, "__name__", None)))
        else:
            raise OptionError(f"candidate: expected a spec, a Candidate or a function, got "
                              f"{type(item).__name__}")
    return out


def _values(candidate, cases, dtypes, devices, profile, seed, report_dir, options) -> dict:
    """The options of a `check` call, typed, as `parse_options` takes them: the command
    line's defaults (`OPTIONS`) where the call gives none."""
    options = {OPTION_ALIASES.get(k, k): v for k, v in options.items()}
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise TypeError(f"check() got unknown option(s) {', '.join(unknown)}; known: "
                        f"{', '.join(OPTIONS)}")
    values = {k: options.get(k, default) for k, default in OPTIONS.items()}
    for name in ("case", "cases_from", "record"):  # repeatable: one spec or several
        values[name] = [values[name]] if isinstance(values[name], str) else list(values[name])
    return dict(values, candidate=_candidates(candidate), profile=profile, seed=seed,
                dtypes=_items(dtypes), devices=_items(devices), cases=_items(cases),
                report_dir=report_dir or "")


def check(candidate=None, *, cases=None, dtypes=None, devices=None,
          profile: str = RUN_DEFAULTS.profile, seed: int = RUN_DEFAULTS.run_seed,
          report_dir: str | None = None, progress: bool = True, **options) -> pd.DataFrame:
    """Run `candidate` through the conformance checks; one row per (candidate, case, dtype,
    device, check), the rows ``pytest suites`` gives with the same options.

    candidate: a registered name (``"torch"``, ``"exact"``, ``"jax"``...), ``"pkg.mod:fn"``,
        ``"path/file.py:fn"``, a `candidates.Candidate`, a function with the torch.nn.init
        protocol, or a list of these; None: torch, and for a model's recorded calls
        (``cases_from=``) the function that made each call.
    cases, dtypes, devices: ids / names (or `harness.cases.Case`, torch dtypes), default: the
        grid, the four float dtypes, cpu and every CUDA device present.
    profile, seed: as ``--profile`` and ``--seed``.
    report_dir: also write the report there (results, summary.md, index.html, manifest.json),
        holding the directory's run lock meanwhile (another run holding it: OptionError). A
        write that fails (a full disk) is a warning naming the file and the errno; the rows are
        still returned, with ``df.attrs["report_fault"]`` saying what failed.
    progress: show a progress bar (tqdm: groups done and to go, samples drawn in the current
        group); in a notebook it is a widget where ipywidgets is installed.
    options: any other option of ``pytest suites`` without its dashes (`OPTIONS`), e.g.
        ``samples=2**20``, ``bounds="strict"``, ``xfails_file="auto"`` (the shipped file
        measured on the installed torch; none: a warning, and every failure counts),
        ``harm_thresholds={"moved@0.5": 0.05}`` (or its text, "moved@0.5=0.05", or a
        `harness.diagnosis.HarmThresholds`: how far each effect figure may go before a failing
        row reads harmful; the rest keep their defaults).

    Raises OptionError (one line naming the option) for a bad value, as the command line exits 4.
    """
    opt = parse_options(_values(candidate, cases, dtypes, devices, profile, seed, report_dir,
                                options), tuple(DTYPES), environ={})
    if opt.xfails_unmatched:
        warnings.warn(opt.xfails_unmatched, stacklevel=2)
    session = plan_run(opt)
    taken_over = session.open_sink(f"harness.check(report_dir={report_dir!r})")
    if taken_over:
        warnings.warn(taken_over, stacklevel=2)
    try:
        # The run's facts are the plan's: known before anything is drawn.
        run = session.run_facts()
        run["command"] = f"harness.check({', '.join(c.spec or c.name for c in session.candidates)})"
        tests = session.planned_tests()
        bar = _Progress(len({param.id for _, param in tests}), enabled=progress)
        try:
            session.run_in_process(tests, on_group=bar.group, progress=bar.samples)
        finally:
            bar.close()
        session.report.finish(0, run["command"], run)
        if session.report.fault is not None:
            warnings.warn(session.report.fault_line().replace(f" (exit {REPORT_WRITE_FAILED})", ""),
                          stacklevel=2)
        info = {"run_id": "api", "started": time.strftime("%Y-%m-%dT%H:%M:%S",
                                                          time.localtime(session.started))}
        frame = results_frame(session.report.rows, info)
        frame.attrs["report_fault"] = (str(session.report.fault) if session.report.fault is not None
                                       else None)
        return frame
    finally:
        session.report.release()


def law(case, dtype, rounding: str = "rn"):
    """The rounded law of `case` (an id or a `Case`) in `dtype` (a name or a torch dtype): the
    exact masses and CDF of what a perfect sampler writes (`reference.RoundedLaw`: ``values``,
    ``probs``, ``prob_le(v)``, ``rn_a``, ``atom_a``, moments, ...)."""
    c = case if isinstance(case, Case) else case_by_id(str(case))
    return rounded_law(TruncatedNormal(c.mean, c.std, c.a, c.b), torch_dtype(dtype),
                       rounding=rounding)


class _Progress:
    """Two tqdm bars: groups done of the run's, and samples drawn in the current group."""

    def __init__(self, total: int, enabled: bool):
        self.bars = None
        self.current = None
        if not enabled:
            return
        from tqdm.auto import tqdm

        self.groups = tqdm(total=total, desc="groups", unit="group", position=0)
        self.draw = tqdm(total=0, desc="samples", unit="sample", unit_scale=True, position=1,
                         leave=False)
        self.bars = (self.groups, self.draw)

    def group(self, group_id: str) -> None:
        """The run goes on to the group `group_id` (the same group again: nothing to show)."""
        if self.bars is None or group_id == self.current:
            return
        if self.current is not None:
            self.groups.update(1)
        self.current = group_id
        self.groups.set_postfix_str(group_id, refresh=False)
        self.draw.reset(total=0)

    def samples(self, drawn: int, target: int) -> None:
        """Called by the engine after each fold: `drawn` of `target` samples of this stage."""
        if self.bars is None:
            return
        if self.draw.total != target:
            self.draw.reset(total=target)
        self.draw.n = drawn
        self.draw.refresh()

    def close(self) -> None:
        if self.bars is None:
            return
        if self.current is not None:
            self.groups.update(1)
        for bar in reversed(self.bars):
            bar.close()
