"""One call of the proposal against torch's trunc_normal_ on an accelerator: its time, the aten ops
it dispatches and the host syncs it makes.

On a GPU a call's cost is its kernels (one per aten op) and its syncs (each stalls the host until
the device catches up: ``.item()``, ``nonzero``, a boolean mask, a Python branch on a tensor).
For each window (the absolute-bounds trap, +-2 sigma, [1, 3], the tail [3, 10]) in float32 and
bfloat16 at ``--size`` elements, and for the 151936 x 4096 bfloat16 embedding of the bug report's
model (the trap's law: std 0.02 on +-2), it measures, for ``torch`` (the installed
``torch.nn.init.trunc_normal_``), ``fast-exact`` (eager: the fixed-work strategy, the default off
the CPU) and ``fast-exact-compiled`` (the same under ``torch.compile(fullgraph=True)``):

* **time per call**: the median of ``--reps`` calls after one warm-up call, synchronized, wall time;
* **ops per call**: aten ops one call dispatches (a dispatch mode), and how many of them read a
  device value on the host (the ops of tests/unit/proposal/test_fixed_work.py);
* **syncs per call**: on CUDA, the synchronizing calls ``torch.cuda.set_sync_debug_mode("warn")``
  reports, and whether the call survives ``set_sync_debug_mode("error")`` (a sync raises there).

Targets (issue 58): <= 1.5x torch on every bulk case, >= 10x faster on the tail, 0 syncs.

``--device cpu`` is the dry run on a machine without a GPU: the same code at a small size, with
the proposal's fixed-work strategy forced (the CPU's default is the chunked one); the sync
columns need CUDA and read "n/a". A tail call of torch that passes ``--cap`` seconds is not
repeated.

    python benchmarks/device_calls.py --device cuda --out device_calls.md
    python benchmarks/device_calls.py --device cpu --size 16 --embedding-rows 64 --reps 2   # dry run
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from candidates.fast_exact import FIXED_WORK, fast_exact_trunc_normal_  # noqa: E402

#: name -> (mean, std, a, b, kind)
WINDOWS = {
    "abs-bounds-trap": (0.0, 0.02, -2.0, 2.0, "bulk"),
    "normal-2sigma": (0.0, 1.0, -2.0, 2.0, "bulk"),
    "asym-window-1-3": (0.0, 1.0, 1.0, 3.0, "bulk"),
    "tail-3-10": (0.0, 1.0, 3.0, 10.0, "tail"),
}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
EMBEDDING = (151936, 4096)
#: kind -> the largest proposal / torch time ratio the target allows
TARGETS = {"bulk": 1.5, "tail": 0.1}
HOST_READ_OPS = frozenset({
    "aten._local_scalar_dense", "aten.item", "aten.is_nonzero", "aten.equal", "aten.allclose",
    "aten.nonzero", "aten.nonzero_numpy", "aten.argwhere", "aten.masked_select", "aten._unique",
    "aten._unique2", "aten.unique_dim", "aten.unique_consecutive", "aten.repeat_interleave",
    "aten.bincount", "aten.histc",
})
HOST_READ_METHODS = frozenset({"tolist", "numpy", "item", "__bool__", "__int__", "__float__",
                               "__index__"})


class OpCounter(TorchDispatchMode):
    """aten ops dispatched inside, and those that read a device value on the host."""

    def __init__(self):
        super().__init__()
        self.ops = 0
        self.host_reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        name = str(func.overloadpacket)
        masks = args[1] if name in ("aten.index", "aten.index_put", "aten.index_put_") else ()
        if name in HOST_READ_OPS or any(isinstance(m, torch.Tensor) and m.dtype in (torch.bool, torch.uint8)
                                        for m in (masks or ())):
            self.host_reads += 1
        return func(*args, **(kwargs or {}))


class MethodCounter(TorchFunctionMode):
    """Tensor methods called inside that read values on the host without an aten op."""

    def __init__(self):
        super().__init__()
        self.host_reads = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in HOST_READ_METHODS:
            self.host_reads += 1
        return func(*args, **(kwargs or {}))


def sampler(name: str, device: str, window: tuple):
    """fill(tensor, generator) of `name`: torch, the proposal eager, the proposal compiled whole."""
    mean, std, a, b = window
    strategy = FIXED_WORK if device == "cpu" else None  # the dry run forces the device strategy
    if name == "torch":
        return lambda t, g: torch.nn.init.trunc_normal_(t, mean, std, a, b, generator=g)
    if name == "fast-exact":
        return lambda t, g: fast_exact_trunc_normal_(t, mean, std, a, b, g, strategy=strategy)
    torch.compiler.reset()  # a fresh compile per window: its floats are the graph's constants
    compiled = torch.compile(lambda t: fast_exact_trunc_normal_(t, mean, std, a, b, strategy=strategy),
                             fullgraph=True)

    def compiled_call(t, g):
        # Dynamo takes no torch.Generator: the compiled graph draws from the global RNG
        torch.manual_seed(int(torch.randint(0, 2**62, (), generator=g, device=g.device)))
        return compiled(t)

    return compiled_call


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_calls(fill, shape, dtype, device, reps: int, cap: float) -> tuple[float, str]:
    """(median seconds per call, note) after one untimed call (a compile, a first allocation)."""
    t = torch.empty(shape, dtype=dtype, device=device)
    g = torch.Generator(device=device).manual_seed(1)
    t0 = time.perf_counter()
    fill(t, g)
    synchronize(device)
    first = time.perf_counter() - t0
    if first > cap:
        return first, f"one call ({first:.1f} s > cap)"
    times = []
    for _ in range(reps):
        synchronize(device)
        t0 = time.perf_counter()
        fill(t, g)
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), ""


def count_call(fill, shape, dtype, device) -> tuple[int, int]:
    """(aten ops, host-read ops) of one eager call."""
    t = torch.empty(shape, dtype=dtype, device=device)
    g = torch.Generator(device=device).manual_seed(2)
    with MethodCounter() as methods, OpCounter() as ops:
        fill(t, g)
    return ops.ops, ops.host_reads + methods.host_reads


def count_syncs(fill, shape, dtype, device) -> tuple[str, str]:
    """(syncs of one call under set_sync_debug_mode("warn"), what "error" mode says); n/a off CUDA."""
    if not device.startswith("cuda"):
        return "n/a", "n/a"
    t = torch.empty(shape, dtype=dtype, device=device)
    g = torch.Generator(device=device).manual_seed(3)
    fill(t, g)  # warm: allocations, a compile
    synchronize(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fill(t, g)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = sum("synchroniz" in str(w.message).lower() for w in caught)
    torch.cuda.set_sync_debug_mode("error")
    try:
        fill(t, g)
        verdict = "no sync"
    except RuntimeError as exc:
        verdict = "raises: " + str(exc).splitlines()[0][:60]
    finally:
        torch.cuda.set_sync_debug_mode("default")
    synchronize(device)
    return str(syncs), verdict


def rows_for(device, shape, dtype_name, window_name, names, args) -> list[dict]:
    mean, std, a, b, kind = WINDOWS[window_name]
    dtype = DTYPES[dtype_name]
    out = []
    for name in names:
        fill = sampler(name, device, (mean, std, a, b))
        seconds, note = time_calls(fill, shape, dtype, device, args.reps, args.cap)
        ops, reads = count_call(fill, shape, dtype, device) if name != "fast-exact-compiled" else ("—", "—")
        if name == "torch" and note:  # a torch call past the cap: not counted or synced again
            syncs, error_mode = "—", "—"
        else:
            syncs, error_mode = count_syncs(fill, shape, dtype, device)
        out.append({"window": window_name, "kind": kind, "dtype": dtype_name,
                    "shape": "x".join(map(str, shape)), "sampler": name, "ms": 1e3 * seconds,
                    "note": note, "ops": ops, "host_reads": reads, "syncs": syncs,
                    "error_mode": error_mode})
        print(f"  {window_name} {dtype_name} {out[-1]['shape']} {name}: {1e3 * seconds:.3f} ms "
              f"{note} ops={ops} host_reads={reads} syncs={syncs} ({error_mode})", flush=True)
    return out


def table(rows: list[dict]) -> str:
    lines = ["| window | dtype | shape | sampler | ms per call | / torch | target | ops | host-read ops | syncs | sync mode \"error\" |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    base = {(r["window"], r["dtype"], r["shape"]): r["ms"] for r in rows if r["sampler"] == "torch"}
    order = list(dict.fromkeys((r["window"], r["dtype"], r["shape"]) for r in rows))
    for r in sorted(rows, key=lambda r: order.index((r["window"], r["dtype"], r["shape"]))):
        ratio = r["ms"] / base[(r["window"], r["dtype"], r["shape"])]
        target = TARGETS[r["kind"]]
        verdict = "" if r["sampler"] == "torch" else ("met" if ratio <= target else "missed")
        shown = f"{r['ms']:.3f}" + (f" ({r['note']})" if r["note"] else "")
        lines.append(f"| {r['window']} | {r['dtype']} | {r['shape']} | {r['sampler']} | {shown} | "
                     f"{ratio:.2f} | {'<= ' + str(target) if r['sampler'] != 'torch' else ''} {verdict} | "
                     f"{r['ops']} | {r['host_reads']} | {r['syncs']} | {r['error_mode']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--size", type=int, default=24, help="log2 elements of the windows' tensors")
    p.add_argument("--embedding-rows", type=int, default=EMBEDDING[0],
                   help="rows of the bf16 embedding (4096 columns)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--cap", type=float, default=10.0, help="a call slower than this is timed once")
    p.add_argument("--out", default="", help="also write the table (markdown) here")
    args = p.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device: nothing measured (run with --device cpu for the dry run)")
        return 0
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU (dry run: fixed-work strategy forced)"
    print(f"torch {torch.__version__} on {where}", flush=True)
    rows = []
    # eager first, compiled after (each compile takes tens of seconds): a run cut short keeps the
    # eager figures
    for names in (("torch", "fast-exact"), ("fast-exact-compiled",)):
        for window in WINDOWS:
            for dtype_name in DTYPES:
                rows += rows_for(args.device, (2**args.size,), dtype_name, window, names, args)
        rows += rows_for(args.device, (args.embedding_rows, EMBEDDING[1]), "bfloat16",
                         "abs-bounds-trap", names, args)
    text = f"torch {torch.__version__}, {where}\n\n" + table(rows)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
