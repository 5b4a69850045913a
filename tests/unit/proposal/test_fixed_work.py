"""The proposal's device strategy does fixed work: the same aten ops whatever n and the random
outcome, a few dozen at most, and none that reads a device value back on the host.

On an accelerator each op is a kernel launch and each host read (``.item()``, ``nonzero``, a
boolean mask, ``tolist``, a Python branch on a tensor) stalls the stream, so the count of both is
the cost of a call there. A dispatch mode records every aten op one call dispatches, and a
torch-function mode the tensor methods that read values without dispatching (``tolist``,
``numpy``, ``__bool__``, ...). They run on CPU tensors with the device strategy forced
(``strategy="fixed-work"``: every block in one pass): the ops are the ones a CUDA tensor would
get, device by device. An eager CPU call goes in passes of CPU_PASS_BLOCKS blocks instead (the
torch patch's function on a CPU); its values are the single pass's, bit for bit.

The grid's four init-time windows (the absolute-bounds trap, +-2 sigma, [1, 3] and the tail
[3, 10]) at 2^16 and 2^24 elements in float32 and bfloat16: the same op sequence at both sizes
and for two seeds, at most `MAX_OPS`, no host read. Every case of the grid in every dtype at 2^16
elements: at most `MAX_OPS`, no host read. No statistics: every assertion here is exact.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from candidates.fast_exact import (BLOCK, CPU_PASS_BLOCKS, FIXED_WORK, fast_exact_trunc_normal_,
                                   fixed_work_trunc_normal_)
from harness.cases import GRID

#: The most aten ops one call may dispatch on the device strategy.
MAX_OPS = 60
#: (mean, std, a, b) of the windows the issue names.
WINDOWS = {
    "abs-bounds-trap": (0.0, 0.02, -2.0, 2.0),
    "normal-2sigma": (0.0, 1.0, -2.0, 2.0),
    "asym-window-1-3": (0.0, 1.0, 1.0, 3.0),
    "tail-3-10": (0.0, 1.0, 3.0, 10.0),
}
SIZES = (2**16, 2**24)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
ALL_DTYPES = {**DTYPES, "float64": torch.float64, "float16": torch.float16}

#: aten ops whose result the host must read from the device before it can go on: a scalar read
#: (item, a Python bool or int of a tensor), or an output whose size depends on the values.
HOST_READ_OPS = frozenset({
    "aten._local_scalar_dense", "aten.item", "aten.is_nonzero", "aten.equal", "aten.allclose",
    "aten.nonzero", "aten.nonzero_numpy", "aten.argwhere", "aten.masked_select",
    "aten._unique", "aten._unique2", "aten.unique_dim", "aten.unique_consecutive",
    "aten.unique_dim_consecutive", "aten.repeat_interleave", "aten.bincount", "aten.histc",
})
#: tensor methods that read values on the host without dispatching an aten op of their own
HOST_READ_METHODS = frozenset({"tolist", "numpy", "item", "__bool__", "__int__", "__float__",
                               "__index__", "__len__", "__iter__", "__array__"})


def _is_boolean_mask(arg) -> bool:
    return isinstance(arg, torch.Tensor) and arg.dtype in (torch.bool, torch.uint8)


class OpRecorder(TorchDispatchMode):
    """Every aten op dispatched inside, by name, and those that read device values on the host
    (`HOST_READ_OPS`, and indexing by a boolean mask, whose result size is the mask's count)."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []
        self.host_reads: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        self.ops.append(str(func))
        indices = args[1] if name in ("aten.index", "aten.index_put", "aten.index_put_") else ()
        if name in HOST_READ_OPS or any(_is_boolean_mask(i) for i in (indices or ())):
            self.host_reads.append(str(func))
        return func(*args, **(kwargs or {}))


class MethodRecorder(TorchFunctionMode):
    """Tensor methods called inside that read values on the host (`HOST_READ_METHODS`)."""

    def __init__(self):
        super().__init__()
        self.host_reads: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_READ_METHODS:
            self.host_reads.append(name)
        return func(*args, **(kwargs or {}))


def record_call(fill, numel: int, dtype: torch.dtype, window: tuple, seed: int):
    """(ops, host reads) of one call ``fill(tensor, *window, generator)`` on a CPU tensor."""
    tensor = torch.empty(numel, dtype=dtype)
    generator = torch.Generator().manual_seed(seed)
    with MethodRecorder() as methods, OpRecorder() as ops:
        fill(tensor, *window, generator)
    return ops.ops, ops.host_reads + methods.host_reads


def device_strategy(tensor, mean, std, a, b, generator):
    return fast_exact_trunc_normal_(tensor, mean, std, a, b, generator, strategy=FIXED_WORK)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("window", WINDOWS.values(), ids=WINDOWS.keys())
def test_the_same_ops_at_every_size_and_outcome(window, dtype):
    small, small_reads = record_call(device_strategy, SIZES[0], dtype, window, seed=1)
    other_seed, _ = record_call(device_strategy, SIZES[0], dtype, window, seed=2)
    large, large_reads = record_call(device_strategy, SIZES[1], dtype, window, seed=1)
    assert small_reads == [] and large_reads == [], (small_reads, large_reads)
    assert len(small) <= MAX_OPS, small
    assert small == other_seed, "the ops depend on the random outcome"
    assert small == large, f"{len(small)} ops at 2^16, {len(large)} at 2^24"


@pytest.mark.parametrize("dtype", ALL_DTYPES.values(), ids=ALL_DTYPES.keys())
def test_every_case_of_the_grid_within_the_budget(dtype):
    """Each grid case once at 2^16 elements: at most MAX_OPS, no host read (the most any case
    takes is in the message)."""
    counts = {}
    for case in GRID:
        ops, reads = record_call(device_strategy, SIZES[0], dtype, (case.mean, case.std, case.a, case.b),
                                 seed=3)
        assert reads == [], (case.id, reads)
        counts[case.id] = len(ops)
    assert max(counts.values()) <= MAX_OPS, counts


@pytest.mark.parametrize("dtype", ALL_DTYPES.values(), ids=ALL_DTYPES.keys())
def test_the_cpu_passes_write_the_single_pass_bits(dtype):
    """An eager CPU call in passes of CPU_PASS_BLOCKS blocks writes what one pass writes: on a
    tensor of 2.5 passes (its last block partial), a transposed one, every window of the issue."""
    numel = (5 * CPU_PASS_BLOCKS // 2) * BLOCK + 7
    key = torch.tensor(0x5EED_F00D, dtype=torch.int64)
    for window in (*WINDOWS.values(), (0.5, 1e-6, -math.inf, math.inf), (0.0, 1.0, 0.3, 0.30001)):
        for shape in ((numel,), (numel // 512 + 1, 512)):
            one = fixed_work_trunc_normal_(torch.empty(shape, dtype=dtype), *window, key=key, one_pass=True)
            passes = fixed_work_trunc_normal_(torch.empty(shape[::-1], dtype=dtype).t(), *window, key=key,
                                              one_pass=False)
            assert torch.equal(one.view(torch.uint8), passes.contiguous().view(torch.uint8)), (window, shape)
        ops, reads = record_call(lambda t, *w: fixed_work_trunc_normal_(t, *w[:4], key=key), numel, dtype,
                                 window, seed=1)
        assert reads == [] and len(ops) <= 3 * MAX_OPS, (len(ops), reads)


def test_the_recorders_see_host_reads():
    """The recorders can fail: a rejection loop (torch's own kind) reads a mask back every round."""
    def rejection(tensor, mean, std, a, b, generator):
        tensor.normal_(mean, std, generator=generator)
        while True:
            outside = (tensor < a) | (tensor > b)
            if not outside.any():
                return tensor
            tensor[outside] = torch.empty(int(outside.sum()), dtype=tensor.dtype).normal_(
                mean, std, generator=generator)

    ops, reads = record_call(rejection, 4096, torch.float32, WINDOWS["normal-2sigma"], seed=1)
    assert reads and len(ops) > 3


def _fill_on_mesh(rank: int, world: int, store: str, results) -> None:
    """One rank: a 37x50 DTensor under row and column shards and a replica, filled with blocks of
    64 elements (parts straddle blocks) and each rank's own seed, by the device strategy's one pass
    and by the eager CPU's passes of CPU_PASS_BLOCKS blocks; rank 0 records whether the whole
    tensor equals the plain tensor of its seed (one pass), bit for bit."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    from candidates import fast_exact

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    fast_exact.BLOCK = 64
    mesh = init_device_mesh("cpu", (world,))
    for placement in (Shard(0), Shard(1), Replicate()):
        for window in (WINDOWS["normal-2sigma"], WINDOWS["tail-3-10"]):
            for dtype, one_pass in itertools.product((torch.bfloat16, torch.float64, torch.float32),
                                                     (True, False)):
                d = distribute_tensor(torch.zeros(37, 50, dtype=dtype), mesh, [placement])
                fixed_work_trunc_normal_(d, *window, torch.Generator().manual_seed(11 + rank),
                                         one_pass=one_pass)
                whole = d.full_tensor()
                plain = device_strategy(torch.zeros(37, 50, dtype=dtype), *window,
                                        torch.Generator().manual_seed(11))
                if rank == 0:
                    results[f"{placement}-{window}-{dtype}-{one_pass}"] = bool(torch.equal(whole, plain))
    dist.destroy_process_group()


@pytest.mark.slow
def test_sharding_invariant_on_a_cpu_mesh(tmp_path):
    """3 ranks (uneven splits of 37 rows): the DTensor holds the plain tensor's values, bit for
    bit, for row and column shards and replicas (slow: three spawned processes, -m slow)."""
    import torch.multiprocessing as mp

    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_fill_on_mesh, args=(3, str(tmp_path / "store"), results), nprocs=3)
        assert len(results) == 36 and all(results.values()), dict(results)
