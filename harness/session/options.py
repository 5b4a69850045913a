"""The harness's command-line options and their validation at start-up.

Every option is registered as text and parsed here, so that a bad value of any of them is one
line naming the option and what it takes (`OptionError`, which the plugin turns into a pytest
usage error: exit status 4), before a worker starts or a candidate is called. argparse's own
errors would print a usage block instead.

`parse_options(option_namespace) -> Options` is pure apart from reading the files and directories
the options name (and, for ``--xfails-file auto``, the installed torch's version and the shipped
xfails/), so it is tested without running pytest.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace

from reference.dtypes import DEFAULT_DTYPE_NAMES, dtype_name
from reports.defects import DEFAULT_FAIL_ON, FAIL_ON

from ..cases import (GRID, PATHS, PROFILES, SHAPE_CLASSES, SHARDED_CASES, SHARDED_DTYPES, Case,
                     CaseSpecError, case_by_id, case_by_label, parse_case_spec)
from ..checks import CHECKS
from ..explore import explore_alpha_fail, explored_cases
from ..model_calls import RecordingError, cases_from
from ..fleet.partition import PartitionError, PartitionSpec, load_durations, resolve_partition
from ..diagnosis import DEFAULT_THRESHOLDS, HarmThresholds, ThresholdsError, parse_thresholds
from ..diagnosis.grading.thresholds import KEYS as THRESHOLD_KEYS
from ..runner import RunConfig
from ..sharded.layout import PLACEMENTS, RANK_SEEDS
from .xfails import AUTO, XfailsChoiceError, choose_xfails

#: The run's defaults are `RunConfig`'s field defaults, written there only: the options below,
#: the reproduce lines and `harness.check` read them from here.
RUN_DEFAULTS = RunConfig()
DEFAULT_DTYPES = DEFAULT_DTYPE_NAMES
DEFAULT_REPORT_DIR = "harness-report"
DEFAULT_CANDIDATE = "torch"
DEFAULT_CASE_TIMEOUT = RUN_DEFAULTS.case_timeout
BOUNDS_POLICIES = ("rounded", "strict")


#: How a list option is registered: each occurrence adds its comma-separated items to the
#: earlier ones' (``--dtypes float32 --dtypes float16`` runs both), as ``--candidate`` and the
#: other repeatable options do; a later occurrence never silently replaces an earlier one.
#: None (not given) leaves the default to `parse_options`.
LIST_OPTION = dict(action="append", default=None, metavar="LIST")


class OptionError(Exception):
    """A bad option value; str() is one line naming the option."""


def add_options(parser, default_seed: int, known_dtypes) -> None:
    g = parser.getgroup("harness", "truncated-normal conformance harness")
    g.addoption("--candidate", action="append", default=[], metavar="SPEC",
                help="sampler under test: a registered name, pkg.mod:fn or path/file.py:fn; "
                     "repeatable (default: torch)")
    g.addoption("--profile", default=RUN_DEFAULTS.profile, metavar="NAME",
                help=f"samples per case: {', '.join(PROFILES)} (default {RUN_DEFAULTS.profile})")
    g.addoption("--samples", default=None, metavar="N",
                help="stage-1 samples per (case, dtype, device), drawn in full (no budget); "
                     "overrides the profile")
    g.addoption("--seed", default=str(default_seed), metavar="S", help="run seed (0 <= S < 2^63)")
    g.addoption("--dtypes", **LIST_OPTION,
                help=f"comma-separated dtypes, repeatable (default {','.join(DEFAULT_DTYPES)}; "
                     f"sharded: {','.join(SHARDED_DTYPES)}; also "
                     f"{', '.join(d for d in known_dtypes if d not in DEFAULT_DTYPES)})")
    g.addoption("--devices", **LIST_OPTION,
                help="comma-separated devices, repeatable (default: cpu and every cuda device "
                     "present)")
    g.addoption("--cases", **dict(LIST_OPTION, metavar="IDS"),
                help="comma-separated case ids, repeatable (default: all); id:SHAPE names one "
                     "shape-axis group, id+PATH one path group")
    g.addoption("--case", action="append", default=[], metavar="SPEC",
                help="a case as data: 'mean=0,std=0.02,a=-0.04,b=0.04[,shape=151936x4096][,id=NAME]' "
                     "(bounds may be inf/-inf); repeatable; without a shape it takes the grid's "
                     "and the shape axis")
    g.addoption("--cases-from", action="append", default=[], metavar="FN",
                help="module:fn or path/file.py:fn that builds and initializes a model: the "
                     "truncated-normal calls it makes (torch's, timm's, keras', jax's, --record's) "
                     "become the cases, each judged with the function that made it unless "
                     "--candidate is given (repeatable)")
    g.addoption("--record", action="append", default=[], metavar="FN",
                help="with --cases-from: also record the calls of this function (module:fn or "
                     "path/file.py:fn, torch.nn.init's convention unless it declares another), "
                     "judged with it (repeatable)")
    g.addoption("--explore", default=None, metavar="N",
                help="N cases drawn from the whole parameter space (a scrambled Sobol design, "
                     "harness.explore), failing ones shrunk to the boundary of their region")
    g.addoption("--explore-seed", default=None, metavar="S",
                help="the design's seed (default: --seed); the same seed gives the same cases")
    g.addoption("--shapes", **LIST_OPTION,
                help="the shape axis: shape classes each case is also drawn at, 'none', or 'all' "
                     f"(default: the profile's; known: {', '.join(SHAPE_CLASSES)})")
    g.addoption("--paths", **LIST_OPTION,
                help=f"execution paths: {', '.join(PATHS)} (default: the profile's: eager; "
                     "nightly: all)")
    g.addoption("--bounds", default=RUN_DEFAULTS.bounds, metavar="POLICY",
                help="rounded: accept values in [RN(a), RN(b)] (default); strict: demand [a, b]")
    g.addoption("--case-timeout", default=str(DEFAULT_CASE_TIMEOUT), metavar="SECONDS",
                help=f"seconds one candidate call may take before it counts as a hang, at "
                     f"least: a tensor that normal_ takes longer than 1/30 of that to fill gets "
                     f"30x normal_'s time; a draw's first call up to 3x (default "
                     f"{DEFAULT_CASE_TIMEOUT:g})")
    g.addoption("--case-budget", default=None, metavar="SECONDS",
                help="seconds of the candidate's own time one case's stage-1 draw may take; the n "
                     "drawn then depends on the machine's speed, is recorded, and the case marked "
                     "budget-limited (default: none; 0: none)")
    g.addoption("--budget-seconds", default=None, metavar="SECONDS",
                help="a wall-clock budget for the whole run's sampling, shared out as equal "
                     "per-case budgets (replaces --case-budget)")
    g.addoption("--alpha-suspect", default=str(RUN_DEFAULTS.alpha_suspect), metavar="A",
                help=f"stage-1 p below this draws stage 2 (default {RUN_DEFAULTS.alpha_suspect:g})")
    g.addoption("--alpha-fail", default=str(RUN_DEFAULTS.alpha_fail), metavar="A",
                help=f"stage-2 p below this fails (default {RUN_DEFAULTS.alpha_fail:g})")
    g.addoption("--report-dir", default=DEFAULT_REPORT_DIR, metavar="DIR",
                help=f"where results go (default ./{DEFAULT_REPORT_DIR}); '' to write nothing")
    g.addoption("--xfails-file", default=None, metavar="FILE",
                help="known failures, one pattern per line with '# cause'; 'auto': the file of "
                     "xfails/ measured on the installed torch's release (none: every failure "
                     "counts, and a line says so)")
    g.addoption("--fail-on", default=DEFAULT_FAIL_ON, metavar="LEVEL",
                help="which failures fail the run, by the level their diagnosis gives: "
                     "harmful (harmful and undetermined), fine (also fine-structure), any (also "
                     "api; the default); a failing row below it is reported as xfail, its verdict "
                     "in the results table stays fail")
    g.addoption("--harm-thresholds", action="append", default=None, metavar="KEY=V,...",
                help="how far each effect figure may go before a failure is harmful, e.g. "
                     "'moved@0.5=0.02,tail@10=1e-4,mean=0.01' (the others keep their defaults; "
                     "repeatable; keys: " + ", ".join(THRESHOLD_KEYS) + "; docs/method/checks.md)")
    # Grid partitions (harness.fleet.partition): this process runs partition K of N of the grid.
    # --shard-id and --num-shards are their former names, kept as aliases.
    g.addoption("--partition-id", "--shard-id", dest="partition_id", default=None, metavar="K",
                help="run grid partition K of --num-partitions N (0-based); default: a CI's "
                     "variables (JOB_COMPLETION_INDEX, BUILDKITE_PARALLEL_JOB, CIRCLE_NODE_INDEX, "
                     "CI_NODE_INDEX), else the whole grid")
    g.addoption("--num-partitions", "--num-shards", dest="num_partitions", default=None,
                metavar="N", help="number of grid partitions (with --partition-id, or alone with "
                                  "JOB_COMPLETION_INDEX)")
    g.addoption("--durations-from", default=None, metavar="DIR",
                help="balance the partitions by the group durations in an earlier run's report "
                     "directory (default: a stable hash of the group key)")
    # Sharded parameters (harness.sharded).
    g.addoption("--world-sizes", **LIST_OPTION,
                help="ranks per sharded parameter, e.g. 2,4; 1 is the unsharded grid (default: the "
                     "profile's, 1; nightly 1,2,4). W > 1 draws the sharded selection of cases "
                     f"({','.join(SHARDED_CASES)}; with --cases-from, the model's calls) unless "
                     "--cases is given")
    g.addoption("--placements", **LIST_OPTION,
                help=f"DTensor placements of a sharded parameter (default {','.join(PLACEMENTS)})")
    g.addoption("--rank-seeds", **LIST_OPTION,
                help="how ranks are seeded: same (every rank torch.manual_seed(s), default), "
                     "per-rank (rank 0 s, the others their own), or both")


class _DefaultsRecorder:
    """Stands in for pytest's parser in `option_defaults`: keeps each option's default."""

    def __init__(self):
        self.defaults: dict = {}

    def getgroup(self, *args, **kwargs):
        return self

    def addoption(self, *names, **kwargs):
        dest = kwargs.get("dest") or names[0].lstrip("-").replace("-", "_")
        self.defaults[dest] = kwargs.get("default")


def option_defaults(known_dtypes=DEFAULT_DTYPES) -> dict:
    """Each option's name as `parse_options` reads it -> the default `add_options` registers
    for it (as text, the way pytest hands it over): the one table of the command line's
    defaults, which `harness.check` takes as its own."""
    recorder = _DefaultsRecorder()
    add_options(recorder, RUN_DEFAULTS.run_seed, tuple(known_dtypes))
    return recorder.defaults


@dataclass(frozen=True)
class Options:
    """The validated options (see `add_options` for their meaning)."""

    candidates: tuple
    profile: str
    samples: int | None
    seed: int
    dtypes: tuple
    devices: tuple | None  # None: the default devices
    cases: tuple
    bounds: str
    case_timeout: float
    case_budget: float | None  # None: no budget
    budget_seconds: float | None
    alpha_suspect: float
    alpha_fail: float
    report_dir: str
    xfails_file: str | None
    partition: PartitionSpec | None = None  # None: the whole grid (harness.fleet.partition)
    durations_from: str | None = None
    durations: dict | None = None  # group -> seconds, from --durations-from
    world_sizes: tuple = (1,)  # 1: the unsharded grid
    placements: tuple = PLACEMENTS
    rank_seeds: tuple = ("same",)
    sharded_cases: tuple = ()  # Cases drawn on W > 1 ranks
    sharded_dtypes: tuple = ()
    shapes: tuple | None = None  # shape classes (None: the profile's)
    paths: tuple | None = None  # execution paths (None: the profile's)
    explore: int = 0  # explored cases (among `cases`)
    explore_seed: int | None = None
    # --candidate was given: it judges every case. Otherwise a model's recorded call is judged
    # with the candidate of the function that made it (`Case.sampler`), the other cases with torch.
    candidates_given: bool = True
    # --xfails-file auto: the line saying which file it chose for the installed torch, or none.
    xfails_choice: str | None = None
    fail_on: str = DEFAULT_FAIL_ON  # the levels of `reports.defects.FAIL_ON` that fail the run
    harm_thresholds: HarmThresholds = DEFAULT_THRESHOLDS  # what a harmful failure exceeds

    @property
    def xfails_unmatched(self) -> str | None:
        """With --xfails-file auto and no shipped file measured on this torch, the line saying
        so (every failure counts as new); else None."""
        return self.xfails_choice if self.xfails_file is None else None


def csv_list(value) -> list[str]:
    """A list option's items: the command line's comma-separated text, each occurrence's in
    turn (a list of texts), or the API's list."""
    return [str(v) for v in typed_list(value)]


def typed_list(value) -> list:
    """A list option's items like `csv_list`, but the objects of a list given typed (the API's
    `Case`s and torch dtypes) kept as they are; a text in the list is split at its commas."""
    items = value if isinstance(value, (list, tuple)) else [value]
    out: list = []
    for item in items:
        if isinstance(item, str):
            out += [v.strip() for v in item.split(",") if v.strip()]
        else:
            out.append(item)
    return out


def _once(specs) -> tuple:
    """The candidates in the order given, a spec named twice once (the same draws would run
    twice for one set of rows); the API's objects as given."""
    seen: set = set()
    out = []
    for spec in specs:
        if isinstance(spec, str):
            if spec in seen:
                continue
            seen.add(spec)
        out.append(spec)
    return tuple(out)


def _joined(value):
    """A text option given once or more (a list of texts: ``--harm-thresholds`` repeated) as one
    comma-separated text; anything else (the API's mapping) as it is."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    return value


def _number(name: str, text, *, integer: bool = False) -> float | int:
    """Parse `text` as a number; integers may be written 4194304, 4_194_304, 2**22 or 4.2e6."""
    value = str(text).strip()
    try:
        if integer and "**" in value:
            base, _, exponent = value.partition("**")
            number = int(base) ** int(exponent)
        else:
            number = float(value.replace("_", ""))
    except (ValueError, OverflowError):
        kind = "an integer" if integer else "a number"
        raise OptionError(f"{name}: expected {kind}, got {value!r}") from None
    if integer:
        if not math.isfinite(number) or number != int(number):
            raise OptionError(f"{name}: expected an integer, got {value!r}")
        return int(number)
    return number


def _require(name: str, text, ok: bool, what: str) -> None:
    if not ok:
        raise OptionError(f"{name}: must be {what}, got {text!r}")


def _positive_seconds(name: str, text, *, zero_means_none: bool = False) -> float | None:
    seconds = _number(name, text)
    if zero_means_none and seconds == 0:
        return None
    what = "0 (none) or a positive number of seconds" if zero_means_none else "a positive number of seconds"
    _require(name, text, math.isfinite(seconds) and seconds > 0, what)
    return seconds


def _alpha(name: str, text) -> float:
    alpha = _number(name, text)
    _require(name, text, 0 < alpha < 1, "a probability strictly between 0 and 1")
    return alpha


def parse_options(opt, known_dtypes, environ=None) -> Options:
    """Validate the raw options; OptionError (one line) on the first bad value. `opt`: pytest's
    option namespace (text, as typed), or a mapping of option name (no dashes) to value, typed
    or text (`harness.check`: numbers, lists, `Case`s, torch dtypes). `environ` (default
    os.environ) is where a CI's partition variables are read from."""
    if isinstance(opt, Mapping):
        opt = SimpleNamespace(**opt)
    profile = str(opt.profile)
    if profile not in PROFILES:
        raise OptionError(f"--profile: unknown {profile!r}; known: {', '.join(PROFILES)}")
    bounds = str(opt.bounds)
    if bounds not in BOUNDS_POLICIES:
        raise OptionError(f"--bounds: unknown {bounds!r}; known: {', '.join(BOUNDS_POLICIES)}")

    samples = None
    if opt.samples is not None:
        samples = _number("--samples", opt.samples, integer=True)
        _require("--samples", opt.samples, samples >= 1, "a positive integer")
    seed = _number("--seed", opt.seed, integer=True)
    _require("--seed", opt.seed, 0 <= seed < 2**63, "an integer in [0, 2^63)")

    dtypes = (tuple(dict.fromkeys(v if isinstance(v, str) else dtype_name(v)
                                  for v in typed_list(opt.dtypes)))
              if opt.dtypes is not None else DEFAULT_DTYPES)  # a dtype named twice runs once
    unknown = [d for d in dtypes if d not in known_dtypes]
    if unknown:
        raise OptionError(f"--dtypes: unknown {', '.join(unknown)}; known: {', '.join(known_dtypes)}")
    if not dtypes:
        raise OptionError("--dtypes: empty list")
    cases, explore, explore_seed = _cases(opt, seed, dtypes, known_dtypes)
    devices = tuple(dict.fromkeys(csv_list(opt.devices))) if opt.devices else None
    if opt.devices is not None and not devices:
        raise OptionError("--devices: empty list")

    case_timeout = _positive_seconds("--case-timeout", opt.case_timeout)
    case_budget = None  # the n never depends on the machine's speed unless asked for
    if opt.case_budget is not None:
        case_budget = _positive_seconds("--case-budget", opt.case_budget, zero_means_none=True)
    budget_seconds = None
    if opt.budget_seconds is not None:
        budget_seconds = _positive_seconds("--budget-seconds", opt.budget_seconds)

    # Absolute from the start: a candidate that changes the working directory must not move
    # what the run writes after it (figures' case data, the in-flight rows).
    report_dir = os.path.abspath(str(opt.report_dir)) if opt.report_dir else ""
    if report_dir and os.path.exists(report_dir) and not os.path.isdir(report_dir):
        raise OptionError(f"--report-dir: {report_dir!r} exists and is not a directory")
    xfails_file, xfails_choice = opt.xfails_file, None
    if xfails_file == AUTO:
        try:
            xfails_file, xfails_choice = choose_xfails()
        except XfailsChoiceError as exc:
            raise OptionError(str(exc)) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise OptionError(f"--xfails-file auto: a file of xfails/: {exc}") from None
    if xfails_file is not None:
        if not os.path.isfile(xfails_file):
            raise OptionError(f"--xfails-file: {xfails_file!r} is not a file")
        if not os.access(xfails_file, os.R_OK):
            raise OptionError(f"--xfails-file: {xfails_file!r} is not readable")
    fail_on = str(getattr(opt, "fail_on", None) or DEFAULT_FAIL_ON)
    if fail_on not in FAIL_ON:
        raise OptionError(f"--fail-on: unknown {fail_on!r}; known: {', '.join(FAIL_ON)}")
    try:
        harm_thresholds = parse_thresholds(_joined(getattr(opt, "harm_thresholds", None)) or None)
    except ThresholdsError as exc:
        raise OptionError(f"--harm-thresholds: {exc}") from None
    partition, durations_from, durations = _partition(opt, environ)
    world_sizes, placements, rank_seeds = _sharding_options(opt, profile)
    shapes = _shapes(getattr(opt, "shapes", None))
    paths = (_choices("--paths", opt.paths, PATHS) if getattr(opt, "paths", None) is not None
             else None)
    recorded = tuple(c for c in cases if c.origin is not None)
    if opt.cases:
        sharded_cases = tuple(cases)
    elif recorded:  # a model's calls are what its sharded parameters are drawn with
        sharded_cases = recorded
    else:
        sharded_cases = tuple(case_by_id(c) for c in SHARDED_CASES)
    sharded_dtypes = dtypes if opt.dtypes is not None else tuple(
        d for d in SHARDED_DTYPES if d in known_dtypes)
    return Options(candidates=_once(opt.candidate or [DEFAULT_CANDIDATE]),
                   candidates_given=bool(opt.candidate), profile=profile, samples=samples,
                   seed=seed, dtypes=dtypes, devices=devices, cases=tuple(cases), bounds=bounds,
                   case_timeout=case_timeout, case_budget=case_budget,
                   budget_seconds=budget_seconds,
                   alpha_suspect=_alpha("--alpha-suspect", opt.alpha_suspect),
                   alpha_fail=_alpha("--alpha-fail", opt.alpha_fail), report_dir=report_dir,
                   xfails_file=xfails_file, xfails_choice=xfails_choice, fail_on=fail_on,
                   harm_thresholds=harm_thresholds,
                   partition=partition,
                   durations_from=durations_from,
                   durations=durations, world_sizes=world_sizes, placements=placements,
                   rank_seeds=rank_seeds, sharded_cases=sharded_cases,
                   sharded_dtypes=sharded_dtypes, shapes=shapes, paths=paths, explore=explore,
                   explore_seed=explore_seed)


def _cases(opt, seed: int, dtypes: tuple, known_dtypes) -> tuple:
    """(cases, explored count, explore seed): --cases (ids, labels, or 'grid'), --case specs,
    --cases-from models and --explore points, in that order; the grid when none is given."""
    cases: list = []
    if opt.cases is not None:
        names = typed_list(opt.cases)
        if not names:
            raise OptionError("--cases: empty list")
        try:
            for name in names:
                if isinstance(name, Case):  # the API's, taken as given
                    cases.append(name)
                    continue
                cases += list(GRID) if name == "grid" else [case_by_label(str(name))]
        except KeyError as exc:
            raise OptionError(f"--cases: {exc.args[0]}") from None
    for spec in getattr(opt, "case", None) or ():
        try:
            cases.append(parse_case_spec(spec))
        except CaseSpecError as exc:
            raise OptionError(f"--case {exc}") from None
    record = tuple(getattr(opt, "record", None) or ())
    if record and not getattr(opt, "cases_from", None):
        raise OptionError("--record: no --cases-from model given")
    for spec in getattr(opt, "cases_from", None) or ():
        try:
            recorded = cases_from(spec, record)
        except RecordingError as exc:
            raise OptionError(str(exc)) from None
        unknown = {d for c in recorded for d in (*c.dtypes, c.drawn_in) if d} - set(known_dtypes)
        if unknown:
            raise OptionError(f"--cases-from {spec!r}: the model initializes {', '.join(sorted(unknown))}, "
                              f"which the harness does not know")
        cases += recorded
    explore, explore_seed = 0, None
    if getattr(opt, "explore", None) is not None:
        explore = _number("--explore", opt.explore, integer=True)
        _require("--explore", opt.explore, 1 <= explore <= MAX_EXPLORE, f"an integer in [1, {MAX_EXPLORE}]")
        explore_seed = seed
        if getattr(opt, "explore_seed", None) is not None:
            explore_seed = _number("--explore-seed", opt.explore_seed, integer=True)
            _require("--explore-seed", opt.explore_seed, 0 <= explore_seed < 2**63,
                     "an integer in [0, 2^63)")
        alpha_suspect = _alpha("--alpha-suspect", opt.alpha_suspect)
        level = explore_alpha_fail(explore * len(dtypes), statistical_verdicts_per_group(), alpha_suspect,
                                   _alpha("--alpha-fail", opt.alpha_fail))
        cases += explored_cases(explore, explore_seed, level)
    elif getattr(opt, "explore_seed", None) is not None:
        raise OptionError("--explore-seed: no --explore N given")
    if not cases:
        cases = list(GRID)
    seen: dict = {}
    for c in cases:
        if c.id in seen:
            raise OptionError(f"--cases/--case: the case {c.id!r} is given twice")
        seen[c.id] = c
    return tuple(cases), explore, explore_seed


def _shapes(text) -> tuple | None:
    """--shapes: shape class names, 'none' (no axis) or 'all' (every class); None: the profile's."""
    if text is None:
        return None
    names = tuple(dict.fromkeys(csv_list(text)))
    if names == ("none",):
        return ()
    if names == ("all",):
        return tuple(SHAPE_CLASSES)
    return _choices("--shapes", text, tuple(SHAPE_CLASSES))


def _partition(opt, environ) -> tuple:
    """(partition, durations_from, durations): which grid partition this process runs
    (harness.fleet.partition)."""
    try:
        partition = resolve_partition(getattr(opt, "partition_id", None),
                                      getattr(opt, "num_partitions", None), environ)
        durations_from = getattr(opt, "durations_from", None)
        durations = None
        if durations_from is not None:
            if partition is None:
                raise OptionError("--durations-from: no partition given (--partition-id K "
                                  "--num-partitions N, or a CI's partition variables)")
            durations = load_durations(durations_from)
    except PartitionError as exc:
        raise OptionError(str(exc)) from None
    return partition, durations_from, durations


MAX_WORLD_SIZE = 1024
MAX_EXPLORE = 100_000


def _choices(name: str, text, known: tuple) -> tuple:
    """A comma-separated list of known names, deduplicated in the order given."""
    values = tuple(dict.fromkeys(csv_list(text)))
    if not values:
        raise OptionError(f"{name}: empty list")
    unknown = [v for v in values if v not in known]
    if unknown:
        raise OptionError(f"{name}: unknown {', '.join(unknown)}; known: {', '.join(known)}")
    return values


def _sharding_options(opt, profile: str) -> tuple[tuple, tuple, tuple]:
    """(world sizes, placements, rank seedings) of --world-sizes, --placements, --rank-seeds."""
    raw = getattr(opt, "world_sizes", None)
    if raw is None:
        world_sizes = tuple(PROFILES[profile].world_sizes)
    else:
        sizes = [_number("--world-sizes", v, integer=True) for v in csv_list(raw)]
        if not sizes:
            raise OptionError("--world-sizes: empty list")
        bad = [str(w) for w in sizes if not 1 <= w <= MAX_WORLD_SIZE]
        if bad:
            raise OptionError(f"--world-sizes: each must be an integer in [1, {MAX_WORLD_SIZE}] "
                              f"(1: unsharded), got {', '.join(bad)}")
        world_sizes = tuple(sorted(set(sizes)))
    placements = getattr(opt, "placements", None)
    placements = _choices("--placements", PLACEMENTS if placements is None else placements,
                          PLACEMENTS)
    rank_seeds = getattr(opt, "rank_seeds", None)
    rank_seeds = _choices("--rank-seeds", ("same",) if rank_seeds is None else rank_seeds,
                          RANK_SEEDS)
    return world_sizes, placements, rank_seeds


def statistical_verdicts_per_group() -> int:
    """The statistical verdicts one unsharded grid group gives (the explorer's family counts
    them)."""
    return sum(1 for c in CHECKS.for_kind("grid") if c.kind == "statistical")
