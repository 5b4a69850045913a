"""A candidate goes down the floors: `harness.check` hands it from the API through the session
steps, the runner and the checks to the engine, and no module it has left gets it back (a check
calling back into its runner, a reproduce line asking the session). `candidate_trace` says how
the path is traced and what counts as a return."""

from __future__ import annotations

import harness
from candidate_trace import trace_candidate

#: The most returns the path may make (a return: a call holding the candidate into a module
#: already earlier in the chain of calls that handed it down).
MAX_RETURNS = 2


def _tiny_run(spec: str):
    return harness.check(spec, cases=["normal-2sigma"], dtypes=["float32"], devices=["cpu"],
                         profile="smoke", progress=False)


def test_the_candidate_goes_down_the_floors():
    trace = trace_candidate(_tiny_run, "exact")
    # The trace sees the candidate all the way: resolved, planned, run, drawn, judged.
    for module in ("harness.api", "harness.session.planner", "candidates.loader",
                   "harness.session.harness_session", "harness.runner.case_runner",
                   "harness.engine.draw", "harness.checks.contract", "candidates.protocol"):
        assert module in trace.modules, trace.text()
    assert len(trace.returns) <= MAX_RETURNS, trace.text()


def _module(name: str, source: str) -> dict:
    namespace = {"__name__": name}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace


def test_the_tracer_counts_a_callback_as_a_return():
    """The figure can fail: a module handing the candidate down with a callback into itself."""
    upper = _module("harness.upper_floor", "def up(candidate):\n    return candidate\n")
    lower = _module("harness.lower_floor",
                    "def down(candidate, back):\n    return back(candidate)\n")

    def run(spec):
        from candidates import resolve

        entry = _module("harness.entry", "def start(candidate, down, up):\n"
                                         "    return down(candidate, up)\n")
        return entry["start"](resolve(spec), lower["down"], upper["up"])

    trace = trace_candidate(run, "exact")
    assert trace.modules[-2:] == ["harness.lower_floor", "harness.upper_floor"], trace.text()
    assert trace.returns == {}, trace.text()  # upper was never left: no return yet

    def run_back(spec):
        from candidates import resolve

        entry = _module("harness.upper_floor", "def start(candidate, down, up):\n"
                                               "    return down(candidate, up)\n")
        return entry["start"](resolve(spec), lower["down"], upper["up"])

    back = trace_candidate(run_back, "exact")
    assert list(back.returns) == [("harness.lower_floor", "harness.upper_floor")], back.text()
