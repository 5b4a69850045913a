"""Device-aware xdist scheduling: CUDA cases reach the workers that own their device.

The scheduler is xdist's own loadscope machinery over the harness's case groups with our
assignment policy; these tests drive it
the way xdist's controller does (add nodes, register collections, schedule, report each test
complete) with stand-in worker handles, so the routing is checked on a machine without GPUs. The
plugin tests run the same scheduler inside real `pytest -n 2` runs.
"""

from __future__ import annotations

import pytest

from harness.fleet.group_ledger import GroupLedger, group_of_nodeid
from harness.fleet.scheduling import (GPU_SLOTS_PER_DEVICE, DeviceGroupScheduling, cuda_index_of_group,
                                owned_cuda_device, pick_group)

CHECKS = ("finite", "gof", "ks")


class _Gateway:
    def __init__(self, gid: str):
        self.id = gid


class Worker:
    """What the scheduler sees of xdist's WorkerController: an id, a queue, a shutdown flag."""

    def __init__(self, gid: str):
        self.gateway = _Gateway(gid)
        self.shutting_down = False
        self.queue: list[int] = []

    def send_runtest_some(self, indices):
        self.queue.extend(indices)

    def shutdown(self):
        self.shutting_down = True

    def __repr__(self):
        return self.gateway.id


def collection(groups):
    return [f"suites/test_conformance.py::test_{check}[{g}]" for g in groups for check in CHECKS]


def groups(n_cpu: int, per_device: dict) -> list[str]:
    out = [f"torch-case{i}-float32-cpu" for i in range(n_cpu)]
    for device, count in per_device.items():
        out += [f"torch-case{i}-float32-cuda:{device}" for i in range(count)]
    return out


@pytest.fixture
def config(pytester):
    return pytester.parseconfig("--tx", "popen", "--dist", "load")


def start(config, n_workers: int, device_count: int, group_names):
    sched = DeviceGroupScheduling(config, device_count=device_count)
    sched.numnodes = n_workers
    workers = [Worker(f"gw{i}") for i in range(n_workers)]
    items = collection(group_names)
    for w in workers:
        sched.add_node(w)
        sched.add_node_collection(w, items)
    sched.schedule()
    return sched, workers, items


def drain(sched, workers, items, crash=None):
    """Run every worker's queue one test at a time, round robin, as xdist reports them; returns
    {nodeid: worker id}. `crash=(worker, after_n_tests)` removes that worker mid-run."""
    ran: dict = {}
    done_by: dict = {w: 0 for w in workers}
    live = list(workers)
    while True:
        progressed = False
        for w in list(live):
            if crash and w is crash[0] and done_by[w] == crash[1]:
                live.remove(w)
                sched.remove_node(w)
                continue
            if w.queue:
                index = w.queue.pop(0)
                assert items[index] not in ran, f"{items[index]} ran twice"
                ran[items[index]] = w.gateway.id
                done_by[w] += 1
                sched.mark_test_complete(w, index)
                progressed = True
        if not progressed:
            break
    return ran


group_of = group_of_nodeid


@pytest.mark.parametrize("nodeid, group", [
    ("suites/test_conformance.py::test_gof[exact-normal-2sigma-float32-cpu]",
     "exact-normal-2sigma-float32-cpu"),
    # xdist's "@group" suffix (--dist loadgroup on pytest < 9.2) changes nothing
    ("suites/test_conformance.py::test_gof[exact-normal-2sigma-float32-cpu]@whatever",
     "exact-normal-2sigma-float32-cpu"),
    # a path candidate's id keeps its slashes, colons and at-signs
    ("suites/test_conformance.py::test_ks[/tmp/a@b/s.py:fn-tail-5-bfloat16-cuda:1]",
     "/tmp/a@b/s.py:fn-tail-5-bfloat16-cuda:1"),
    ("suites/test_api.py::test_arguments[torch-float16-cpu]", "torch-float16-cpu"),
    ("tests/test_x.py::test_plain", "tests/test_x.py::test_plain"),
])
def test_group_of_nodeid(nodeid, group):
    assert group_of_nodeid(nodeid) == group


def test_checks_of_one_case_form_one_group():
    ids = [f"suites/test_conformance.py::test_{c}[torch-tail-5-float32-cpu]" for c in CHECKS]
    assert {group_of_nodeid(i) for i in ids} == {"torch-tail-5-float32-cpu"}


def test_ledger_flags_a_group_split_across_live_workers_only():
    ledger = GroupLedger()
    assert not ledger.record("g1", "gw0") and not ledger.record("g1", "gw0")
    assert ledger.record("g1", "gw1"), "two live workers ran one group"
    assert ledger.splits == {"g1": ["gw0", "gw1"]}
    assert "gw0 and gw1" in ledger.split_message("g1", "LoadScheduling")
    # a crashed worker's group moves on to another worker: not a split
    assert not ledger.record("g2", "gw0")
    ledger.worker_down("gw0")
    assert not ledger.record("g2", "gw2") and "g2" not in ledger.splits


def test_parsing_and_ownership():
    assert cuda_index_of_group("torch-normal-2sigma-bfloat16-cuda:3") == 3
    assert cuda_index_of_group("torch-normal-2sigma-bfloat16-cpu") is None
    assert cuda_index_of_group("torch-normal-2sigma-bfloat16-cuda") is None  # any worker's own
    assert cuda_index_of_group("tests/unit/harness/test_engine.py::test_x[cuda:1-y]") is None
    assert [owned_cuda_device(f"gw{k}", 3) for k in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert owned_cuda_device("gw5", 0) is None and owned_cuda_device("main", 2) is None


@pytest.mark.parametrize("group, device", [
    ("torch-normal-2sigma-bfloat16-cuda:1-w2-shard0", 1),
    ("torch-normal-2sigma-bfloat16-cuda:0-w4-replicate", 0),
    ("torch-vit-pos-embed-float32-cuda:3-w2-shard1-perrank", 3),
    ("torch-normal-2sigma-bfloat16-cpu-w2-shard0", None),
    ("torch-normal-2sigma-bfloat16-cuda-w2-shard0", None),
    ("torch-normal-2sigma-bfloat16-cuda:1-w2-bogus", None),
])
def test_sharded_groups_keep_their_device(group, device):
    """A sharded group's id is the combo id plus its layout (harness.sharded.layout): its rank 0 runs on
    the device named before the layout, so it goes to that device's workers."""
    assert cuda_index_of_group(group) == device
    assert group_of_nodeid(f"suites/test_conformance.py::test_shards[{group}]") == group


def test_sharded_cuda_groups_run_on_their_owners(config):
    names = [f"torch-case{i}-float32-cuda:{i % 2}-w2-shard{i % 2}" for i in range(6)]
    names += [f"torch-case{i}-float32-cpu-w2-replicate" for i in range(4)]
    sched, workers, items = start(config, 4, 2, names)
    ran = drain(sched, workers, items)
    assert set(ran) == set(items)
    by_group: dict = {}
    for nodeid, worker in ran.items():
        by_group.setdefault(group_of(nodeid), set()).add(worker)
    assert all(len(w) == 1 for w in by_group.values())
    for group, (worker,) in by_group.items():
        device = cuda_index_of_group(group)
        if device is not None:
            assert owned_cuda_device(worker, 2) == device, (group, worker)


def test_pick_group_policy():
    a, d = "torch-a-float32-cpu", "torch-d-float32-cpu"
    b, c = "torch-b-float32-cuda:0", "torch-c-float32-cuda:1"
    queue = [c, a, b, d]
    owned = {0, 1}
    assert pick_group(queue, 0, owned, busy_on_own=0) == b  # own device first
    assert pick_group(queue, 0, owned, busy_on_own=GPU_SLOTS_PER_DEVICE) == a  # GPU full
    assert pick_group([b, c], 0, owned, GPU_SLOTS_PER_DEVICE) == b
    assert pick_group([c], 0, owned, 0) is None  # another owner's work
    assert pick_group([c], 0, {0}, 0) == c  # no live owner: anyone
    assert pick_group(queue, None, owned, 0) == a  # a worker without a device


@pytest.mark.parametrize("n_workers,device_count", [(4, 2), (3, 2), (6, 4), (5, 1)])
def test_cuda_groups_run_only_on_their_owners(config, n_workers, device_count):
    names = groups(8, {d: 3 for d in range(device_count)})
    sched, workers, items = start(config, n_workers, device_count, names)
    ran = drain(sched, workers, items)
    assert set(ran) == set(items) and sched.tests_finished
    by_group: dict = {}
    for nodeid, worker in ran.items():
        by_group.setdefault(group_of(nodeid), set()).add(worker)
    assert all(len(w) == 1 for w in by_group.values()), "a case's checks were split"
    for group, (worker,) in by_group.items():
        device = cuda_index_of_group(group)
        if device is not None and device < n_workers:
            assert owned_cuda_device(worker, device_count) == device, (group, worker)
    cpu_workers = {next(iter(w)) for g, w in by_group.items() if g.endswith("-cpu")}
    assert len(cpu_workers) >= min(n_workers, 2), "CPU cases ran on one worker only"


def test_one_gpu_is_not_handed_to_every_worker(config):
    """Four workers all own the one GPU: two start on it, two on CPU cases."""
    sched, workers, items = start(config, 4, 1, groups(8, {0: 8}))
    first = [group_of(items[w.queue[0]]) for w in workers]
    assert sum(g.endswith("cuda:0") for g in first) == GPU_SLOTS_PER_DEVICE
    assert sum(g.endswith("-cpu") for g in first) == 4 - GPU_SLOTS_PER_DEVICE
    ran = drain(sched, workers, items)
    assert set(ran) == set(items)


def test_devices_without_a_worker_go_to_anyone(config):
    """-n 1 on two GPUs: gw0 owns cuda:0 and still runs the cuda:1 cases."""
    sched, workers, items = start(config, 1, 2, groups(2, {0: 2, 1: 2}))
    ran = drain(sched, workers, items)
    assert set(ran) == set(items) and set(ran.values()) == {"gw0"}


def test_owner_crash_hands_its_device_to_the_others(config):
    sched, workers, items = start(config, 2, 2, groups(2, {0: 2, 1: 3}))
    ran = drain(sched, workers, items, crash=(workers[1], 2))
    # loadscope requeues the unfinished part of a dead worker's groups (xdist reports the test
    # it was running as crashed); here it all lands on gw0, cuda:1 cases included
    assert set(ran) == set(items)
    late = [n for n in ran if group_of(n).endswith("cuda:1") and ran[n] == "gw0"]
    assert late, "cuda:1 work stranded after its only owner died"


def test_without_cuda_it_is_plain_group_scheduling(config):
    names = groups(6, {}) + ["torch-case9-float32-cuda:0"]  # skipped cases still get scheduled
    sched, workers, items = start(config, 3, 0, names)
    ran = drain(sched, workers, items)
    assert set(ran) == set(items) and len(set(ran.values())) == 3


def test_replacement_worker_gets_work_only_after_its_collection(config):
    """xdist adds a replacement for a crashed worker before its collection arrives; a schedule()
    in between (another replacement's collection finishing) must leave it alone."""
    sched, workers, items = start(config, 2, 0, groups(6, {}))
    gw0, gw1 = workers
    sched.remove_node(gw1)  # crashed while running its first test
    replacement = Worker("gw2")
    sched.add_node(replacement)
    first = gw0.queue.pop(0)
    sched.mark_test_complete(gw0, first)
    sched.schedule()  # what another replacement's finished collection triggers: every node
    assert replacement.queue == []
    sched.add_node_collection(replacement, items)
    sched.schedule()
    assert replacement.queue, "the replacement never got work"
    ran = drain(sched, [gw0, replacement], items)
    assert set(ran) | {items[first]} == set(items) and sched.tests_finished
