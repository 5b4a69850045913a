"""Which xdist worker runs which case: a case's checks stay together, a CUDA case goes to a worker
that owns its device, and CPU cases keep every worker busy.

Worker ``gwK`` of W owns CUDA device ``K mod D`` (D = visible CUDA devices; the controller decides
and tells the worker, which pins it with ``torch.cuda.set_device`` before CUDA initializes). The
unit of scheduling is a case group (one (candidate, case, dtype, device), see `harness.fleet.group_ledger`),
read from the node id by the harness itself; a group whose name ends in ``-cuda:J`` is a *device
group* of device J.

`DeviceGroupScheduling` is xdist's ``loadscope`` scheduler with the harness's groups as scopes and
one change, in which group a worker asking for work gets:

1. a group of its own device, if fewer than `GPU_SLOTS_PER_DEVICE` workers are running that
   device's groups right now: one GPU is kept busy by a couple of processes, and more would only
   queue on it while the host cores idle;
2. else a group that any worker may run (CPU cases, the self-tests, ``cuda`` without an index,
   devices no live worker owns), so CPU cases are not starved behind GPU ones;
3. else a group of its own device anyway (nothing else is left);
4. else nothing: the worker shuts down, as loadscope's workers do when the queue is empty.

Device groups go only to owners while an owner lives; if every owner has gone (crashed), anyone
may take them, so no group is ever stranded. Verdicts do not depend on the worker (seeds derive
from the case, not the worker), so the assignment changes timing only.
"""

from __future__ import annotations

import re

from xdist.scheduler import LoadScopeScheduling

from record.ids import group_device

from .group_ledger import group_of_nodeid

#: At most this many workers run groups of one CUDA device at a time (while CPU work is queued).
GPU_SLOTS_PER_DEVICE = 2

_CUDA_DEVICE = re.compile(r"cuda:(?P<index>[0-9]+)")
_WORKER_ID = re.compile(r"^gw(\d+)$")


def cuda_index_of_group(group: str) -> int | None:
    """CUDA device index a group is bound to (``...-cuda:J``, or ``...-cuda:J-<layout>`` for a
    sharded group, whose ranks use cuda:J, J+1, ...), None for any other group."""
    match = _CUDA_DEVICE.fullmatch(group_device(group) or "")
    return int(match["index"]) if match else None


def worker_index(worker_id: str) -> int | None:
    match = _WORKER_ID.match(worker_id)
    return int(match.group(1)) if match else None


def visible_cuda_devices() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def owned_cuda_device(worker_id: str, device_count: int) -> int | None:
    """The CUDA device worker ``gwK`` owns: K mod device_count (None without CUDA devices)."""
    index = worker_index(worker_id)
    if index is None or device_count <= 0:
        return None
    return index % device_count


def pick_group(groups, own_device: int | None, owned_devices: set, busy_on_own: int,
               slots: int = GPU_SLOTS_PER_DEVICE) -> str | None:
    """The group a worker takes next (the policy of the module docstring), from `groups` in queue
    order. `owned_devices`: devices some live worker owns; `busy_on_own`: how many workers run a
    group of the worker's own device now."""
    own_first = own_device is not None and busy_on_own < slots
    first_own = first_any = None
    for group in groups:
        device = cuda_index_of_group(group)
        if device is not None and device == own_device:
            if own_first:
                return group
            if first_own is None:
                first_own = group
        elif device is None or device not in owned_devices:
            if not own_first:
                return group
            if first_any is None:
                first_any = group
        if first_own is not None and first_any is not None:
            break
    return first_any if first_any is not None else first_own


class DeviceGroupScheduling(LoadScopeScheduling):
    """xdist's loadscope over case groups, with device-aware assignment (see the module docstring)."""

    def __init__(self, config, log=None, device_count: int | None = None):
        super().__init__(config, log)
        self.device_count = visible_cuda_devices() if device_count is None else device_count

    def _split_scope(self, nodeid: str) -> str:
        return group_of_nodeid(nodeid)

    def own_device(self, node) -> int | None:
        return owned_cuda_device(node.gateway.id, self.device_count)

    def _live_owned_devices(self) -> set:
        return {self.own_device(node) for node in self.assigned_work
                if not node.shutting_down} - {None}

    def _busy_on(self, device: int | None) -> int:
        if device is None:
            return 0
        busy = 0
        for work in self.assigned_work.values():
            if any(cuda_index_of_group(group) == device and not all(unit.values())
                   for group, unit in work.items()):
                busy += 1
        return busy

    def _assign_work_unit(self, node) -> bool:
        """Give `node` the group `pick_group` chooses; False when there is none for it."""
        own = self.own_device(node)
        group = pick_group(self.workqueue, own, self._live_owned_devices(), self._busy_on(own))
        if group is None:
            return False
        work_unit = self.workqueue.pop(group)
        self.assigned_work.setdefault(node, {})[group] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some([collection.index(nodeid)
                                for nodeid, completed in work_unit.items() if not completed])
        return True

    def drop_queued(self, keep) -> list[str]:
        """Take every queued group for which ``keep(group)`` is false off the queue (a candidate
        that crashes its workers, `harness.plugin.crashes`); their node ids. Groups already
        handed to a worker are not taken back."""
        dropped = []
        for group in list(self.workqueue):
            if not keep(group):
                dropped += list(self.workqueue.pop(group))
        for node in list(self.assigned_work):  # nothing left to hand out: idle workers stop
            self._reschedule(node)
        return dropped

    def _reschedule(self, node) -> None:
        if node.shutting_down or node not in self.registered_collections:
            # (A replacement for a crashed worker gets work once its collection is in.)
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 2:
            return
        if not self._assign_work_unit(node):
            node.shutdown()  # what is queued belongs to other devices' owners

    def schedule(self) -> None:
        # loadscope's initial distribution calls _assign_work_unit on every node and expects
        # work; with devices a node may have none: it is shut down, as _reschedule would.
        if self.collection is not None or not self.collection_is_completed:
            return super().schedule()
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = list(next(iter(self.registered_collections.values())))
        if not self.collection:
            return
        groups: dict = {}
        for nodeid in self.collection:
            groups.setdefault(self._split_scope(nodeid), {})[nodeid] = False
        order = list(groups.items())
        if self.config.getoption("loadscopereorder", True):
            order.sort(key=lambda item: -len(item[1]))  # loadscope's default: big groups first
        self.workqueue.update(order)
        for _ in range(2):  # two groups per worker to start with, as loadscope does
            for node in self.nodes:
                if node.shutting_down or node not in self.registered_collections:
                    continue
                if self._pending_of(self.assigned_work[node]) <= 2:
                    if not self.workqueue or not self._assign_work_unit(node):
                        node.shutdown()
