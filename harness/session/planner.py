"""A run is built in two steps, the same for the pytest plugin and the Python API:

    options = parse_options(...)                 # harness.session.options: validated, typed
    session = plan_run(options)                  # resolve the candidates, then plan the run
    taken_over = session.open_sink(command)      # open the sink: the report directory, locked

`plan_run` resolves the candidates that judge the cases (`resolve_candidates`), checks the
devices and reads the xfails, and hands them down to the `HarnessSession`, which lists its groups
(no two with one id) and, for a partitioned run, the groups this process runs. Each step raises
`OptionError` (one line) on what it cannot do, before anything is drawn. The plugin opens the sink
on the xdist controller only, and not for ``--collect-only``; a session whose sink is never opened
writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from candidates import CandidateNotFound, resolve

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
    """The candidates that judge the run's cases. The --candidate list judges every case;
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


def plan_run(opt: Options) -> HarnessSession:
    """The run's plan: its candidates (`resolve_candidates`), its devices (each checked), its
    xfails, then the session, which lists its groups (`HarnessSession.__init__`)."""
    judges = resolve_candidates(opt)
    devices = list(opt.devices) if opt.devices else default_devices()
    for device in devices:
        check_device_name(device)
    try:
        xfails = load_xfails(opt.xfails_file) if opt.xfails_file else []
    except (OSError, UnicodeDecodeError, XfailsFormatError) as exc:
        raise OptionError(f"--xfails-file: {opt.xfails_file!r}: {exc}") from None
    return HarnessSession(opt, judges.candidates, judges.by_sampler, devices, xfails)
