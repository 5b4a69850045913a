"""Real ranks (torch.distributed, gloo), real DTensors: the boxes, the draws, and ranks that raise,
hang or die.

Every test here starts rank processes through `harness.sharded.ranks` exactly as a run does (one
pool per world size, reused across draws in this process, replaced when a draw had to kill it).
A candidate that misbehaves on one rank only is a file candidate (``path/file.py:fn``) written by
the test: the ranks resolve it by path, as they would a user's sampler.
"""

from __future__ import annotations

import textwrap
import time

import pytest
import torch

from candidates import resolve
from harness.sharded import dtensor_runner as sharded_runner, ranks
from harness.cases import Case, case_by_id
from harness.sharded.ranks import get_pool
from harness.sharded.dtensor_runner import ShardedCaseRunner
from harness.engine import CandidateFailure
from harness.sharded.layout import Layout, local_box
from harness.runner import RunConfig

CFG = RunConfig(samples=4096, case_timeout=3.0)
SMALL = Case("small", 0.0, 1.0, -2.0, 2.0, (8, 6))


def _runner(spec, case=SMALL, layout=Layout(2, "shard0"), dtype=torch.float32, config=CFG,
            **kw):
    cand = resolve(spec)
    return ShardedCaseRunner(cand, case, dtype, "cpu", config, layout, **kw)


BOX_PROBE = '''
import json, os, torch
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

def probe(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Writes each rank's DTensor box to a file next to this one, then fills the tensor."""
    with torch.no_grad():
        if isinstance(tensor, DTensor):
            shape, offset = compute_local_shape_and_global_offset(
                tensor.shape, tensor.device_mesh, tensor.placements)
            local = tensor.to_local()
            rank = tensor.device_mesh.get_coordinate()[0]
            out = os.path.join(os.path.dirname(__file__), f"box-{rank}.json")
            with open(out, "w") as fh:
                json.dump({"shape": list(shape), "offset": list(offset),
                           "local": list(local.shape), "param": type(tensor).__name__,
                           "requires_grad": tensor.requires_grad,
                           "placements": str(tensor.placements)}, fh)
            local.fill_(0.5)
        else:
            tensor.fill_(0.5)
    return tensor
'''


@pytest.mark.parametrize("layout", [Layout(4, "shard0"), Layout(4, "shard1"), Layout(2, "replicate")],
                         ids=lambda l: l.label)
def test_the_ranks_hold_the_boxes_harness_layout_computes(tmp_path, layout):
    """10 rows over 4 ranks are 3, 3, 3, 1 (7 columns: 2, 2, 2, 1); every rank's DTensor agrees
    with harness.sharded.layout."""
    (tmp_path / "probe.py").write_text(BOX_PROBE)
    case = Case("uneven", 0.0, 1.0, -2.0, 2.0, (10, 7))
    runner = _runner(f"{tmp_path}/probe.py:probe", case=case, layout=layout)
    s = runner.summary(1)
    assert not isinstance(s, CandidateFailure), s
    import json

    for rank in range(layout.world_size):
        got = json.loads((tmp_path / f"box-{rank}.json").read_text())
        offsets, local = local_box(case.shape, layout, rank)
        assert tuple(got["offset"]) == offsets and tuple(got["shape"]) == local
        assert tuple(got["local"]) == local
        assert got["requires_grad"] is True  # an nn.Parameter wrapping the DTensor, as FSDP2 holds it


def test_the_pool_is_reused_across_groups_and_draws():
    first = _runner("exact-counter")
    assert not isinstance(first.summary(1), CandidateFailure)
    pool = get_pool(2, "cpu")
    pids = [p.pid for p in pool.procs]
    draws = pool.draws
    second = _runner("exact-counter", layout=Layout(2, "replicate"), dtype=torch.bfloat16)
    assert not isinstance(second.summary(1), CandidateFailure)
    assert get_pool(2, "cpu") is pool and [p.pid for p in pool.procs] == pids
    assert pool.draws == draws + 1
    assert all(torch.get_num_threads() >= 1 for _ in pool.procs)


def test_torch_on_a_cpu_mesh_writes_identical_shards():
    """The issue's finding: torch 2.13, gloo, one seed on every rank, an 8x6 bf16 DTensor."""
    case = Case("issue", 0.0, 0.02, -2.0, 2.0, (8, 6))
    for placement in ("shard0", "shard1"):
        runner = _runner("torch", case=case, layout=Layout(2, placement), dtype=torch.bfloat16)
        s = runner.summary(1)
        (pair,) = s.sharding.pairs
        assert pair.calls_equal == pair.calls == s.n_calls and pair.equal == pair.elements
        assert runner.run("shards").verdict == "fail"
        assert any("may not have complete support on cpu device mesh" in w for w in runner.warnings)


def test_exact_counter_is_the_unsharded_tensor_on_every_layout():
    case = case_by_id("abs-bounds-trap")
    for layout in (Layout(2, "shard0"), Layout(2, "shard1"), Layout(2, "replicate"),
                   Layout(2, "shard1", "per-rank")):
        runner = _runner("exact-counter", case=case, layout=layout, dtype=torch.bfloat16)
        s = runner.summary(1)
        st = s.sharding
        assert st.reference_calls == min(sharded_runner.REFERENCE_CALLS, s.n_calls)
        assert st.reference_differing == 0 and st.reference_elements > 0
        for check in ("replicas", "shards", "sharding"):
            # replicas, sharding: exact equality; shards: two stages, false alarm <= 1e-6
            assert runner.run(check).verdict in ("pass", "skip"), (layout, check)
        assert runner.run("sharding").verdict == "pass"


def test_ranks_fold_the_mass_bins_and_the_watched_values_of_the_whole():
    """Stage 2 of a float32 sharded group on real ranks: the merged mass-bin counts and the
    watched values' tallies (spikes) are those of the unsharded tensor from the same seed
    (exact-counter writes it bit for bit on every layout)."""
    import numpy as np

    from harness.runner import CaseRunner

    case = case_by_id("normal-2sigma")
    plain = CaseRunner(resolve("exact-counter"), case, torch.float32, "cpu", CFG)
    seen = np.flatnonzero(plain.summary(2).localized.mass_hist)
    # bins that this very draw hit (the same seed is drawn again below): >= 1 count each, by
    # construction, on any machine
    watch = tuple(int(j) for j in seen[:: max(1, seen.size // 8)][:8])
    plain = CaseRunner(resolve("exact-counter"), case, torch.float32, "cpu", CFG)
    plain.watch_list = lambda: watch
    whole = plain.summary(2)
    assert whole.localized.watch_counts is not None and whole.localized.watch_counts.sum() >= len(watch)
    for layout in (Layout(2, "shard0"), Layout(2, "shard1")):
        runner = _runner("exact-counter", case=case, layout=layout)
        runner.watch_list = lambda: watch
        merged = runner.summary(2)
        assert merged.n == whole.n
        assert np.array_equal(merged.localized.mass_hist, whole.localized.mass_hist), layout
        assert merged.localized.watch_bins == whole.localized.watch_bins
        assert np.array_equal(merged.localized.watch_keys, whole.localized.watch_keys), layout
        assert np.array_equal(merged.localized.watch_counts, whole.localized.watch_counts), layout


def _one_rank(tmp_path, body: str, name: str = "bad", others: str = "local") -> str:
    """A candidate that runs `body` on rank 1 of a DTensor; elsewhere it fills the local shard
    with the exact sampler (`others="local"`: no collective) or is exact-counter (`"counter"`:
    the other ranks wait in its key broadcast)."""
    fill = ("exact_counter_trunc_normal_(tensor, mean, std, a, b, generator)" if others == "counter"
            else "exact_trunc_normal_(tensor.to_local() if isinstance(tensor, DTensor) else tensor, "
                 "mean, std, a, b, generator)")
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(f'''
        import os, signal, time
        import torch
        from candidates.builtin import exact_trunc_normal_
        from candidates.dtensor_samplers import exact_counter_trunc_normal_

        def fn(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
            from torch.distributed.tensor import DTensor
            with torch.no_grad():
                if isinstance(tensor, DTensor) and tensor.device_mesh.get_coordinate()[0] == 1:
                    {body}
                {fill}
            return tensor
    '''))
    return f"{tmp_path}/{name}.py:fn"


def _failed_rows(runner) -> dict:
    return {check: runner.run(check) for check in runner.check_names()}


def test_a_rank_that_raises_gives_fail_rows_and_keeps_the_pool(tmp_path):
    spec = _one_rank(tmp_path, 'raise ValueError("rank one refuses")')
    pool = get_pool(2, "cpu")
    t0 = time.monotonic()
    rows = _failed_rows(_runner(spec))
    assert time.monotonic() - t0 < 60  # about a hang only: seconds expected
    assert rows["finite"].verdict == "fail"
    assert "rank 1 of 2: call 1 raised ValueError: rank one refuses" in rows["finite"].message
    assert rows["hang"].verdict == "pass"  # it returned, with an error
    assert all(r.verdict in ("fail", "skip") for c, r in rows.items() if c != "hang"), rows
    assert get_pool(2, "cpu") is pool  # every rank stopped at the same call: no kill


def test_a_rank_that_turns_its_parameters_grad_off_gives_fail_rows(tmp_path):
    """A sampler that leaves a model's parameter untrainable broke it, sharded or not: each
    call is compared with the parameter as it was given (its shard, and its own flag)."""
    spec = _one_rank(tmp_path, "tensor.requires_grad_(False)")
    pool = get_pool(2, "cpu")
    rows = _failed_rows(_runner(spec))
    assert rows["finite"].verdict == "fail"
    assert ("rank 1 of 2: call 1 changed the tensor it was given (requires_grad True -> False)"
            in rows["finite"].message)
    assert get_pool(2, "cpu") is pool  # every rank stopped at the same call: no kill


def test_a_rank_that_raises_while_the_other_waits_in_a_collective_is_named(tmp_path):
    """Rank 0 waits in exact-counter's key broadcast for a rank 1 that raised before it: the
    cause is rank 1's error, and the pool is replaced after the grace period (not a timeout)."""
    spec = _one_rank(tmp_path, 'raise ValueError("rank one refuses")', "bcast", others="counter")
    pool = get_pool(2, "cpu")
    t0 = time.monotonic()
    result = _runner(spec).run("finite")
    assert time.monotonic() - t0 < ranks.FAILURE_GRACE_S + 20  # about a hang: the grace, not 30 s
    assert result.verdict == "fail"
    assert "rank 1 of 2: call 1 raised ValueError: rank one refuses" in result.message
    assert not pool.alive


def test_a_rank_that_hangs_in_python_is_a_hang_and_the_pool_stays(tmp_path):
    spec = _one_rank(tmp_path, "while True: pass", "loop")
    config = RunConfig(samples=4096, case_timeout=1.0)
    pool = get_pool(2, "cpu")
    rows = _failed_rows(_runner(spec, config=config))
    assert rows["hang"].verdict == "fail"
    # a rank's every call gets a plain draw's first-call limit: 3 x --case-timeout
    assert "rank 1 of 2: call 1 did not return within 3 s" in rows["hang"].message
    assert get_pool(2, "cpu") is pool


def test_a_rank_that_dies_gives_error_rows_and_a_new_pool(tmp_path):
    spec = _one_rank(tmp_path, "os._exit(7)", "die")
    pool = get_pool(2, "cpu")
    rows = _failed_rows(_runner(spec))
    assert rows["finite"].verdict == "error"
    assert "rank 1 died (exit code 7)" in rows["finite"].message
    assert not pool.alive and all(not p.is_alive() for p in pool.procs)  # the others were killed
    after = _runner("exact-counter")  # the next group gets fresh ranks and works
    assert not isinstance(after.summary(1), CandidateFailure)
    assert get_pool(2, "cpu") is not pool


def test_a_rank_stuck_where_no_signal_reaches_is_killed_after_the_stall_margin(tmp_path):
    # SIGSTOP: the rank cannot run its SIGALRM handler; only the worker's stall deadline helps.
    spec = _one_rank(tmp_path, "os.kill(os.getpid(), signal.SIGSTOP)", "stop")
    config = RunConfig(samples=4096, case_timeout=1.0)
    pool = get_pool(2, "cpu")
    t0 = time.monotonic()
    runner = _runner(spec, config=config, stall_margin_s=4.0)
    rows = _failed_rows(runner)
    elapsed = time.monotonic() - t0  # ~7 s (the limit and the margin); < 40 asserts no hang, not speed
    assert rows["hang"].verdict == "fail", rows["hang"].message
    # silent past its call's limit (3 x 1 s) and the stall margin (4 s)
    assert "rank 1 of 2" in rows["hang"].message and "sent nothing for 7 s" in rows["hang"].message
    assert elapsed < 40
    assert not pool.alive and all(not p.is_alive() for p in pool.procs)


def test_a_rank_that_never_starts_its_draw_is_named_as_such(tmp_path):
    """A rank stopped before the task reaches it (SIGSTOP from outside: it cannot even read it)
    never says it started: the draw names it "did not start", an error row (no call was made, so
    no verdict on the candidate), not a stuck call; the rank that started and waited is not
    blamed. Deterministic: the stopped rank cannot send anything, whatever the scheduling."""
    import os
    import signal

    config = RunConfig(samples=4096, case_timeout=1.0)
    pool = get_pool(2, "cpu")
    os.kill(pool.procs[1].pid, signal.SIGSTOP)
    t0 = time.monotonic()
    result = _runner("exact-counter", config=config, stall_margin_s=2.0,
                     harness_stall_s=6.0).run("finite")
    elapsed = time.monotonic() - t0  # the harness's limit (6 s); < 40 asserts no hang
    assert result.verdict == "error", result.message
    assert "rank 1 of 2: rank 1 did not start its draw within" in result.message, result.message
    assert "stuck" not in result.message and "rank 0" not in result.message
    assert elapsed < 40
    assert not pool.alive and all(not p.is_alive() for p in pool.procs)


def _heard(*messages, sent: float = 0.0) -> ranks.RankProgress:
    progress = ranks.RankProgress(sent)
    for msg in messages:
        progress.hear(msg)
    return progress


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_a_stall_is_blamed_on_the_rank_inside_a_call_whoever_spoke_last(order):
    """Rank 1 entered call 1 and stopped there; rank 0 left its call 1 (earlier, on its clock)
    and waits in the all-reduce: rank 1 is stuck, whichever rank the worker heard from last and
    in whatever order it holds them (limits: 5 s in a call, 10 s outside)."""
    said = {0: _heard(("started", 0, 0.1), ("calling", 0, 0.2, "call 1"), ("returned", 0, 1.0)),
            1: _heard(("started", 1, 0.5), ("calling", 1, 1.1, "call 1"))}
    progress = {r: said[r] for r in order}
    assert not ranks.stalled(progress, list(order), 5.9, 5.0, 10.0)  # rank 1's call in its limit
    assert ranks.stalled(progress, list(order), 6.2, 5.0, 10.0)
    blamed = ranks.blame_stall(progress, list(order), 6.2, 5.0, 10.0)
    assert blamed[1][0] == "stall" and "sent nothing for 5 s: stuck in call 1" in blamed[1][1]
    assert blamed[0][0] == "peer"


def test_a_rank_slow_in_the_harness_is_not_stuck_until_the_harness_limit():
    """Both ranks between calls (a DeviceMesh to build on a busy machine), rank 0 silent longer:
    not a stall at the call's limit, only past the harness's (the process-group timeout); a rank
    that then enters a call and stops there is the one blamed."""
    progress = {0: _heard(("started", 0, 0.1), ("returned", 0, 1.0)),
                1: _heard(("started", 1, 0.1), ("returned", 1, 2.0))}
    assert not ranks.stalled(progress, [0, 1], 6.5, 5.0, 10.0)
    progress[1].hear(("calling", 1, 7.0, "call 1"))
    assert not ranks.stalled(progress, [0, 1], 11.5, 5.0, 10.0)  # rank 1's call within 5 s
    assert ranks.stalled(progress, [0, 1], 12.5, 5.0, 10.0)
    blamed = ranks.blame_stall(progress, [0, 1], 12.5, 5.0, 10.0)
    assert blamed[1][0] == "stall" and "stuck in call 1" in blamed[1][1]
    assert blamed[0][0] == "peer"


def test_a_rank_that_never_said_it_started_did_not_start():
    progress = {0: _heard(("started", 0, 0.1)), 1: _heard()}
    assert not ranks.stalled(progress, [0, 1], 5.2, 5.0, 10.0)
    assert ranks.stalled(progress, [0, 1], 10.2, 5.0, 10.0)
    blamed = ranks.blame_stall(progress, [0, 1], 10.2, 5.0, 10.0)
    assert blamed[1][0] == "unstarted" and "did not start its draw within 10 s" in blamed[1][1]
    assert blamed[0][0] == "peer"
    # after a peer's failure (its rendezvous timed out waiting), the grace names it the same way
    late = ranks.blame_late(progress, [1], 8.0, 5.0, 10.0, 5.0)
    assert late[1][0] == "unstarted" and "did not start its draw within 8 s" in late[1][1]


def test_outside_every_call_the_rank_silent_longest_is_stuck():
    progress = {0: _heard(("started", 0, 0.1), ("returned", 0, 2.0)),
                1: _heard(("started", 1, 0.1), ("returned", 1, 1.0))}
    assert ranks.stalled(progress, [0, 1], 11.5, 5.0, 10.0)
    blamed = ranks.blame_stall(progress, [0, 1], 11.5, 5.0, 10.0)
    assert blamed[1][0] == "stall" and "10 s: stuck outside the candidate's calls" in blamed[1][1]
    assert blamed[0][0] == "peer"
    # a rank still in a call after a peer's failure is stuck there once past the limit, not before
    calling = {0: _heard(("started", 0, 0.1), ("calling", 0, 1.0, "call 3"))}
    assert ranks.blame_late(calling, [0], 6.5, 5.0, 10.0, 5.0)[0][0] == "stall"
    assert ranks.blame_late(calling, [0], 5.5, 5.0, 10.0, 5.0)[0][0] == "peer"


def test_no_rank_outlives_close_pools():
    pool = get_pool(2, "cpu")
    procs = list(pool.procs)
    ranks.close_pools()
    assert all(not p.is_alive() for p in procs)


def test_skip_reasons():
    from harness.sharded.dtensor_runner import sharded_skip_reason

    assert sharded_skip_reason(Layout(2, "shard0"), "cpu", (8, 6)) is None
    assert "needs a tensor of at least 2 dims" in (
        sharded_skip_reason(Layout(2, "shard1"), "cpu", (8,)) or "") or \
        "cuts dim 1" in sharded_skip_reason(Layout(2, "shard1"), "cpu", (8,))
    if not torch.cuda.is_available():
        assert "cuda is not available" in sharded_skip_reason(Layout(2, "shard0"), "cuda:0", (8, 6))
    elif torch.cuda.device_count() < 4:
        why = sharded_skip_reason(Layout(4, "shard0"), "cuda:0", (8, 6))
        assert why and "needs 4 GPUs" in why


def test_a_rank_that_writes_nothing_is_seen_by_written(tmp_path):
    spec = _one_rank(tmp_path, "return tensor", "lazy")
    runner = _runner(spec)
    written = runner.run("written")
    assert written.verdict == "fail"
    s = runner.summary(1)
    assert s.support.n_unwritten == s.n // 2  # rank 1's half of every call still holds the poison


def test_a_budget_stops_every_rank_at_the_same_call(tmp_path):
    (tmp_path / "slow.py").write_text(textwrap.dedent('''
        import time
        from candidates.dtensor_samplers import exact_counter_trunc_normal_

        def fn(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
            time.sleep(0.05)
            return exact_counter_trunc_normal_(tensor, mean, std, a, b, generator)
    '''))
    config = RunConfig(samples=48 * 60, case_budget_s=0.3)  # 60 calls asked of an 8x6 tensor
    runner = _runner(f"{tmp_path}/slow.py:fn", config=config)
    s = runner.summary(1)
    assert not isinstance(s, CandidateFailure), s
    # not load-dependent: 60 calls sleep >= 3 s in all, ten times the budget, so the budget stops
    # the draw on any machine (a busy one only stops it sooner)
    assert s.notes.get("stopped_by_budget") and s.n_calls < 60 and s.n == s.n_calls * 48
    # gof on exact-counter's draw: two stages, false alarm <= 1e-6
    assert runner.budget_limited and runner.run("gof").verdict in ("pass", "skip")
