"""A candidate goes down the floors: `harness.check` hands it from the API through the session
steps, the runner and the checks to the engine. Two figures hold it (`candidate_trace` says how
the path is traced and what each counts):

- no module it has left gets it back down a chain of calls (a check calling back into its
  runner, a reproduce line asking the session): at most `MAX_RETURNS` chain returns;
- its trip, file by file, nested calls included, comes back to a file it had left at most
  `MAX_TRIP_RETURNS` times, is never handed up a floor more than `MAX_HANDOFFS_UP` times, and
  steps up a floor at most `MAX_TRIP_CLIMBS` times.

The climbs count every step up of the file sequence, a runner going on after its check's body as
much as a callback. Only an API check's call is handed the candidate (a judge of the draw is told
the group's facts without it), so judging the draw is no climb; the session names its groups from
the candidate's name (`harness.group.group_names`), so making them is none either; and a group's
API checks come after every check of its draw (`harness.checks.CHECKS`). Three remain, each a
caller going on after its callee: the planner after the loader resolved the candidates, the
session after the first group's checks (its row, then the next kind of group's runner), and the
runner after its draw (the draw's checks).
"""

from __future__ import annotations

import configparser

import pytest

import harness
from candidate_trace import (climbs, climbs_up, floors, handoffs_up, returns, stays,
                             trace_candidate)

#: The most returns the path may make (a return: a call holding the candidate into a module
#: already earlier in the chain of calls that handed it down).
MAX_RETURNS = 2
#: The most stays of the trip in a file it had already left.
MAX_TRIP_RETURNS = 12
#: The most calls of the trip from a lower floor into a higher one (`.importlinter`'s layers).
MAX_HANDOFFS_UP = 3
#: The most steps of the trip's file sequence up a floor.
MAX_TRIP_CLIMBS = 3


def _tiny_run(spec: str):
    return harness.check(spec, cases=["normal-2sigma"], dtypes=["float32"], devices=["cpu"],
                         profile="smoke", progress=False)


@pytest.fixture(scope="module")
def trace():
    return trace_candidate(_tiny_run, "exact")


def test_the_candidate_goes_down_the_floors(trace):
    # The trace sees the candidate all the way: resolved, planned, run, drawn, judged.
    for module in ("harness.api", "harness.session.planner", "candidates.loader",
                   "harness.session.run_plan", "harness.runner.case_runner",
                   "harness.engine.draw", "harness.checks.contract", "candidates.protocol"):
        assert module in trace.modules, trace.text()
    assert len(trace.returns) <= MAX_RETURNS, trace.text()


def test_only_a_call_of_the_candidate_is_handed_it(trace):
    # The judges of the draw (harness.checks.hard) are told the group's facts, not the candidate;
    # the API checks (harness.checks.contract) call it, so they are handed it.
    assert "harness.checks.contract" in trace.modules, trace.text()
    assert "harness.checks.hard" not in trace.modules, trace.text()
    assert "harness.declaration" not in trace.modules, trace.text()


def test_the_trip_seldom_comes_back_and_is_not_handed_up(trace):
    floor = floors()
    assert len(returns(trace.trip)) <= MAX_TRIP_RETURNS, trace.trip_text(floor)
    ups = handoffs_up(trace.trip, trace.trip_callers, floor)
    assert len(ups) <= MAX_HANDOFFS_UP, f"{ups}\n{trace.trip_text(floor)}"
    assert len(climbs(trace.trip, floor)) <= MAX_TRIP_CLIMBS, trace.trip_text(floor)


# -- the counting, on hand-made trips ---------------------------------------------------------

FLOORS = """
[importlinter]
root_packages =
    top
    low
[importlinter:contract:roots]
type = layers
layers =
    top
    low
[importlinter:contract:top]
type = layers
containers =
    top
layers =
    api
    session | plugin_side
    runner
"""


def _floors() -> dict:
    config = configparser.ConfigParser()
    config.read_string(FLOORS)
    return floors(config)


def test_stays_merge_consecutive_calls_in_one_file():
    assert stays(["a", "a", "b", "a", "a", "c", "c"]) == ["a", "b", "a", "c"]
    assert stays([]) == []


def test_a_return_is_a_stay_in_a_file_left_before():
    assert returns(["a", "b", "b", "c"]) == []
    assert returns(["a", "b", "a", "a", "c", "b"]) == [("b", "a"), ("c", "b")]
    # Staying is not returning; each new stay in a left file counts, however often.
    assert returns(["a", "a", "a"]) == []
    assert returns(["a", "b", "a", "b", "a"]) == [("b", "a"), ("a", "b"), ("b", "a")]


def test_floors_come_from_the_layers_contracts():
    floor = _floors()
    assert floor[""] == {"top": 2, "low": 1}
    assert floor["top"] == {"api": 3, "session": 2, "plugin_side": 2, "runner": 1}


def test_a_climb_is_a_step_to_a_higher_floor():
    floor = _floors()
    assert climbs_up(floor, "low.x", "top.runner")  # the roots' floors first
    assert not climbs_up(floor, "top.api", "low.x")
    assert climbs_up(floor, "top.runner.cache", "top.session.steps")  # then the container's
    assert not climbs_up(floor, "top.session", "top.plugin_side")  # one floor: no climb
    assert not climbs_up(floor, "top.session.a", "top.session.b")  # one layer: no climb
    assert not climbs_up(floor, "top.unlisted", "top.api")  # no floor: no climb
    trip = ["top.api", "top.session", "top.runner", "low.k", "top.runner", "top.session"]
    assert climbs(trip, floor) == [("low.k", "top.runner"), ("top.runner", "top.session")]
    assert returns(trip) == [("low.k", "top.runner"), ("top.runner", "top.session")]


def test_the_real_floors_put_the_api_above_the_engine():
    floor = floors()
    assert climbs_up(floor, "harness.engine.draw", "harness.api")
    assert climbs_up(floor, "candidates.protocol", "candidates.loader")
    assert climbs_up(floor, "reference.atoms", "harness.group")
    assert not climbs_up(floor, "harness.session.sink", "harness.session.planner")


# -- the tracer, on hand-made modules -----------------------------------------------------------

def _module(name: str, source: str, filename: str | None = None) -> dict:
    namespace = {"__name__": name}
    path = filename or name.replace(".", "/") + ".py"
    exec(compile(source, path, "exec"), namespace)
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


def test_the_trip_walks_a_loop_once_and_counts_the_climb_back():
    """The trip's figures can fail: a session handing the candidate to the engine, which calls
    back up into the session, in a loop; and code no file holds is no stay."""
    session = _module("harness.session.fake_steps",
                      "def start(candidate, down, up):\n"
                      "    for _ in range(3):\n"
                      "        down(candidate, up)\n"
                      "def up(candidate):\n"
                      "    return candidate\n")
    engine = _module("harness.engine.fake_draw",
                     "def down(candidate, back):\n"
                     "    return back(candidate)\n")
    generated = _module("harness.engine.fake_draw", "def made(candidate):\n    return candidate\n",
                        filename="<generated>")

    def run(spec):
        from candidates import resolve

        candidate = resolve(spec)
        generated["made"](candidate)
        return session["start"](candidate, engine["down"], session["up"])

    trace = trace_candidate(run, "exact")
    trip = [m for m in trace.trip if m.startswith("harness.")]
    assert stays(trip) == ["harness.session.fake_steps", "harness.engine.fake_draw",
                           "harness.session.fake_steps"], trace.trip_text()
    assert returns(trip) == [("harness.engine.fake_draw", "harness.session.fake_steps")]
    assert climbs(trip, floors()) == [("harness.engine.fake_draw", "harness.session.fake_steps")]
    assert handoffs_up(trace.trip, trace.trip_callers, floors()) == [
        ("harness.engine.fake_draw", "harness.session.fake_steps")]


def test_a_caller_going_on_after_its_callee_climbs_but_hands_nothing_up():
    """The session hands the candidate to the engine, then goes on with it: a step up of the file
    sequence, but no call from the engine into the session."""
    session = _module("harness.session.fake_steps",
                      "def start(candidate, down):\n"
                      "    down(candidate)\n"
                      "    return after(candidate)\n"
                      "def after(candidate):\n"
                      "    return candidate\n")
    engine = _module("harness.engine.fake_draw", "def down(candidate):\n    return candidate\n")

    def run(spec):
        from candidates import resolve

        return session["start"](resolve(spec), engine["down"])

    trace = trace_candidate(run, "exact")
    trip = [m for m in trace.trip if m.startswith("harness.")]
    assert climbs(trip, floors()) == [("harness.engine.fake_draw", "harness.session.fake_steps")]
    assert handoffs_up(trace.trip, trace.trip_callers, floors()) == []


def test_the_candidates_own_methods_are_its_work_not_its_trip():
    """A call of a `Candidate` method on the candidate (its `describe`, `sharded_reason`) is no
    stay, though the chains still see it; a function of the same module handed the candidate is."""
    protocol_function = _module("candidates.protocol", "def look(candidate):\n"
                                                       "    return candidate.describe()\n")
    session = _module("harness.session.fake_steps",
                      "def start(candidate, look):\n"
                      "    candidate.sharded_reason()\n"
                      "    candidate.describe()\n"
                      "    return look(candidate)\n")

    def run(spec):
        from candidates import resolve

        return session["start"](resolve(spec), protocol_function["look"])

    trace = trace_candidate(run, "exact")
    assert [f for m, f in zip(trace.trip, trace.trip_functions) if m == "candidates.protocol"] \
        == ["look"], trace.trip_text()
    assert stays(trace.trip)[-2:] == ["harness.session.fake_steps", "candidates.protocol"]
    described = [c for c in trace.calls if c[-2:] == ("harness.session.fake_steps",
                                                        "candidates.protocol")]
    assert described, trace.text()  # the chains still hold the methods' calls
