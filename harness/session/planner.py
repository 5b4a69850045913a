"""A run is built in three steps, the same for the pytest plugin and the Python API:

    options = parse_options(...)              # harness.session.options: validated, typed
    judges = resolve_candidates(options)      # 1. resolve: the candidates that judge the cases
    session = plan_run(options, judges)       # 2. plan: devices, xfails, groups, the partition
    taken_over = open_sink(session, command)  # 3. open the sink: the report directory, locked

Each step raises `OptionError` (one line) on what it cannot do, before anything is drawn. The
plugin opens the sink on the xdist controller only, and not for ``--collect-only``; a session
whose sink is never opened writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from candidates import CandidateNotFound, resolve

from ..fleet.partition import plan
from ..group import id_clash
from .devices import check_device_name, default_devices
from .run_plan import HarnessSession
from .options import OptionError, Options
from .xfails import XfailsFormatError, load_xfails


@dataclass(frozen=True)
class Judges:
    """The resolved candidates of a run, in order, and the candidate of each sampler spec (a
    model's recorded call is judged with the candidate of the function that made it)."""

    candidates: tuple
    by_sampler: dict = field(default_factory=dict)


def resolve_candidates(opt: Options) -> Judges:
    """Step 1: the candidates that judge the run's cases. The --candidate list judges every case;
    without it, a model's recorded call is judged with the candidate of the function that made it
    (its `Case.sampler`, a registered name or a --record spec), every other case with the default
    candidate, which a run whose every case names its sampler does not hold. OptionError (one
    line) for a spec that does not resolve."""
    if opt.candidates_given:
        specs = list(opt.candidates)
    else:
        # The cases of every group the run draws, unsharded and sharded: a run whose cases all
        # come from a model's calls holds the samplers it recorded, and the default candidate
        # only where a case names none.
        drawn = list(opt.cases) if 1 in opt.world_sizes else []
        if any(w > 1 for w in opt.world_sizes):
            drawn += list(opt.sharded_cases)
        samplers = list(dict.fromkeys(c.sampler for c in drawn if c.sampler))
        specs = list(opt.candidates) if any(not c.sampler for c in drawn) else []
        specs += [s for s in samplers if s not in specs]
    candidates, by_sampler = [], {}
    for spec in specs:
        try:
            candidate = resolve(spec)
        except CandidateNotFound as exc:
            raise OptionError(str(exc)) from None
        candidates.append(candidate)
        if isinstance(spec, str):
            by_sampler[spec] = candidate
    return Judges(tuple(candidates), by_sampler)


def plan_run(opt: Options, judges: Judges) -> HarnessSession:
    """Step 2: the run's plan: its devices (each checked), its xfails, its groups (no two with
    one id) and, for a partitioned run, the groups this process runs (`harness.fleet.partition`)."""
    devices = list(opt.devices) if opt.devices else default_devices()
    for device in devices:
        check_device_name(device)
    try:
        xfails = load_xfails(opt.xfails_file) if opt.xfails_file else []
    except (OSError, UnicodeDecodeError, XfailsFormatError) as exc:
        raise OptionError(f"--xfails-file: {opt.xfails_file!r}: {exc}") from None
    session = HarnessSession(opt, judges.candidates, judges.by_sampler, devices, xfails)
    clash = id_clash((*session.groups(), *session.api_groups()))
    if clash:
        raise OptionError(clash)
    if opt.partition is not None:
        session.partition = plan(opt.partition, session.grid_groups(), opt.durations,
                                 opt.durations_from)
    return session


def open_sink(session: HarnessSession, command: str = "") -> str | None:
    """Step 3: make the report directory ready before anything is drawn (its run lock, the
    "running" manifest with the plan's facts, the row log: `ReportSink.open`). OptionError when
    it cannot be written or another run holds it; a line when the lock of a run that died was
    taken over, else None."""
    return session.report.open(command, session.manifest_facts())
