"""Speed of the samplers side by side: the proposal `fast-exact` against torch's own `trunc_normal_`,
the gold sampler `exact` and the seed report's two workarounds (`fp32-upcast`, `rejection-loop`).

Each table times whole calls ``cand(tensor, mean, std, a, b, generator)`` on a fresh contiguous
tensor; for each cell the candidates are called in turn, repeated ``--reps`` times (interleaved, so
a load spike hits all of them alike), and the median is kept. Times are ns per element: the
process's CPU time with 1 thread (robust to other processes' load on a shared machine), wall time
with all threads; ``fast-exact / torch`` is the ratio of the medians (below 1: faster than torch).

1. **side by side** at ``--table-size`` (default 2^22) elements, 1 thread: every candidate, on the
   grid's init cases (N(0,1) on +-2, the +-100 sigma trap, ViT's +-2 sigma at std 0.02), an
   asymmetric window [1, 3], a tail window [3, 10] and a narrow window [8, 8.01] (mean 0, std 1),
   float32 and bfloat16;
2. **by size**: fast-exact and torch from 2^16 to 2^24 elements, 1 thread and all threads, on
   every cell: ns per element and the ratio at each size (the tail cell stops where torch's call
   passes ``--cap`` seconds);
3. **the floor**: on the trap, the cheapest exact source of each dtype's construction alone
   (float64 ``uniform_``, the float64 Box-Muller `normal64`, torch's float64 ``normal_``; float32
   ``normal_`` for 16-bit) against torch's whole call, 1 thread.

Targets (fast-exact / torch on the same call, at every size and thread count): the trap <= 2.0x in
float32 and <= 1.25x in bfloat16; every other bulk case (+-2 sigma, ViT, the asymmetric window)
<= 1.0x; the tail window >= 10x faster (<= 0.1x). Each is printed with its verdict; the narrow
window has none (torch's uniform proposals there run in the tensor's dtype, its 16-bit defect).

Bounded: a call slower than ``--slow`` seconds is measured once; a candidate whose call took longer
than ``--cap`` seconds is not run at larger sizes of that cell (shown as ``>cap``); rejection-loop
is not run where the window holds < 5% of N(mean, std) (it would draw ~1/P normals per element:
it hangs on the tail and narrow windows, which is its known defect). The machine this runs on is
shared: read the ratios, not the seconds.

    python benchmarks/samplers.py                     # the README's tables (~30 min on 2 busy cores)
    python benchmarks/samplers.py --quick             # 2^18 elements, 2 reps: a smoke run (~2 min)
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from candidates import resolve  # noqa: E402
from candidates.fast_exact import CHUNK, normal64  # noqa: E402

#: name -> (mean, std, a, b, kind): kind is the target that applies (trap, bulk, tail, narrow)
CASES = {
    "normal-2sigma": (0.0, 1.0, -2.0, 2.0, "bulk"),
    "abs-bounds-trap": (0.0, 0.02, -2.0, 2.0, "trap"),
    "vit-pos-embed": (0.0, 0.02, -0.04, 0.04, "bulk"),
    "asym-window-1-3": (0.0, 1.0, 1.0, 3.0, "bulk"),
    "tail-3-10": (0.0, 1.0, 3.0, 10.0, "tail"),
    "narrow-window-8": (0.0, 1.0, 8.0, 8.01, "narrow"),
}
CANDIDATES = ("fast-exact", "torch", "exact", "fp32-upcast", "rejection-loop")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: (kind, dtype) -> the largest fast-exact / torch ratio the target allows
TARGETS = {("trap", "float32"): 2.0, ("trap", "bfloat16"): 1.25, ("bulk", "float32"): 1.0,
           ("bulk", "bfloat16"): 1.0, ("tail", "float32"): 0.1, ("tail", "bfloat16"): 0.1}
#: rejection-loop draws ~1/P normals per element: not run below this window mass
REJECTION_MIN_MASS = 0.05
#: where the tensors live (``--device``): on CUDA every call is timed in wall time, synchronized
DEVICE = {"name": "cpu"}


def window_mass(mean: float, std: float, a: float, b: float) -> float:
    """P(a <= X <= b) for X ~ N(mean, std^2) (rough: only to decide what to run)."""
    cdf = lambda x: 0.5 * math.erfc(-(x - mean) / (std * math.sqrt(2.0)))  # noqa: E731
    return cdf(b) - cdf(a)


def clock():
    """The process's CPU time with one thread on the CPU, wall time with several (CPU time adds
    them up) and on CUDA (synchronized before each reading)."""
    if DEVICE["name"] != "cpu":
        def synchronized() -> float:
            torch.cuda.synchronize()
            return time.perf_counter()
        return synchronized
    return time.process_time if torch.get_num_threads() == 1 else time.perf_counter


def time_call(cand, n: int, dtype, params, seed: int) -> float:
    """Seconds of one call on a fresh tensor of n elements."""
    t = torch.empty(n, dtype=dtype, device=DEVICE["name"])
    g = torch.Generator(device=DEVICE["name"]).manual_seed(seed)
    tick = clock()
    t0 = tick()
    cand(t, *params, generator=g)
    return tick() - t0


def measure(names, n: int, dtype, params, reps: int, slow: float, cap: float, capped: set,
            key) -> dict:
    """name -> median seconds (or None where skipped): the candidates interleaved, rep by rep."""
    times: dict[str, list[float] | None] = {name: [] for name in names}
    for name in names:
        if (name, key) in capped:
            times[name] = None
    for rep in range(reps):
        for name in names:
            if times[name] is None or (rep > 0 and times[name][0] > slow):
                continue
            times[name].append(time_call(resolve(name), n, dtype, params, seed=rep))
    out = {}
    for name, ts in times.items():
        out[name] = None if ts is None else statistics.median(ts)
        if ts and max(ts) > cap:
            capped.add((name, key))
    return out


def fmt_ns(seconds, n) -> str:
    return "—" if seconds is None else f"{1e9 * seconds / n:,.1f}"


def fmt_ratio(x, base) -> str:
    return "—" if x is None or base is None else f"{x / base:.2f}"


def side_by_side(names, n, threads, args, capped) -> list[dict]:
    torch.set_num_threads(threads)
    rows = []
    for dname, dtype in DTYPES.items():
        for cname, (m, s, a, b, kind) in CASES.items():
            run = [x for x in names
                   if not (x == "rejection-loop" and window_mass(m, s, a, b) < REJECTION_MIN_MASS)]
            med = measure(run, n, dtype, (m, s, a, b), args.reps, args.slow, args.cap, capped,
                          (cname, dname, threads))
            rows.append({"dtype": dname, "case": cname, "kind": kind, "n": n, "threads": threads,
                         **{x: med.get(x) for x in names}})
            print("  " + " ".join(f"{x}={fmt_ns(med.get(x), n)}" for x in names),
                  f"[{dname} {cname} 2^{round(math.log2(n))} {threads} thr]", flush=True)
    return rows


def print_table(rows, names, title):
    n = rows[0]["n"]
    print(f"\n### {title}\n")
    print("| dtype | case | " + " | ".join(f"{x} ns/el" for x in names) + " | fast-exact / torch |")
    print("|---|---|" + "---|" * len(names) + "---|")
    for r in rows:
        cells = [fmt_ns(r[x], n) if r[x] is not None or x != "rejection-loop" else "hangs" for x in names]
        print(f"| {r['dtype']} | {r['case']} | " + " | ".join(cells)
              + f" | {fmt_ratio(r['fast-exact'], r['torch'])} |")


def by_size(sizes, thread_counts, args, capped) -> list[dict]:
    """fast-exact and torch at every size and thread count: one row per (dtype, case, threads)."""
    names = ("fast-exact", "torch")
    rows = []
    for threads in thread_counts:
        for dname, dtype in DTYPES.items():
            for cname, (m, s, a, b, kind) in CASES.items():
                row = {"dtype": dname, "case": cname, "kind": kind, "threads": threads, "sizes": {}}
                for k in sizes:
                    torch.set_num_threads(threads)
                    med = measure(names, 2**k, dtype, (m, s, a, b), args.reps, args.slow, args.cap,
                                  capped, (cname, dname, threads, "size"))
                    row["sizes"][k] = (med["fast-exact"], med["torch"])
                print(f"  [{dname} {cname} {threads} thr] "
                      + " ".join(f"2^{k}:{fmt_ratio(*v)}" for k, v in row["sizes"].items()), flush=True)
                rows.append(row)
    return rows


def print_by_size(rows, sizes):
    print("\n### fast-exact / torch by size (ns per element: fast-exact / torch, then the ratio)\n")
    print("| dtype | case | threads | " + " | ".join(f"2^{k}" for k in sizes) + " |")
    print("|---|---|---|" + "---|" * len(sizes))
    for r in rows:
        cells = []
        for k in sizes:
            fe, tt = r["sizes"][k]
            n = 2**k
            cells.append("—" if fe is None or tt is None
                         else f"{fmt_ns(fe, n)} / {fmt_ns(tt, n)} (**{fe / tt:.2f}**)")
        print(f"| {r['dtype']} | {r['case']} | {r['threads']} | " + " | ".join(cells) + " |")


def verdicts(rows) -> list[str]:
    """One line per (dtype, case, threads) with a target: the worst ratio over its sizes."""
    out = []
    for r in rows:
        target = TARGETS.get((r["kind"], r["dtype"]))
        if target is None:
            continue
        ratios = {k: fe / tt for k, (fe, tt) in r["sizes"].items() if fe is not None and tt is not None}
        if not ratios:
            out.append(f"{r['dtype']} {r['case']} ({r['threads']} thr): not measured")
            continue
        worst = max(ratios, key=ratios.get)
        ok = ratios[worst] <= target
        want = f">= {1 / target:.0f}x faster" if target < 1 else f"<= {target}x torch"
        out.append(f"{'MET ' if ok else 'MISS'} {r['dtype']} {r['case']} ({r['threads']} thread(s)): "
                   f"fast-exact / torch {min(ratios.values()):.2f}-{ratios[worst]:.2f} over "
                   f"2^{min(ratios)}-2^{max(ratios)} (worst at 2^{worst}; target {want})")
    return out


def floor(n: int, reps: int) -> None:
    """The trap, 1 thread: each dtype's cheapest exact source alone against torch's whole call."""
    torch.set_num_threads(1)
    m, s, a, b, _ = CASES["abs-bounds-trap"]
    like = torch.empty(0, dtype=torch.float64)

    def chunked(draw):
        # in fast-exact's chunks, as it draws them (a pass over 2^20 values stays in cache)
        def run(g):
            for start in range(0, n, CHUNK):
                draw(min(CHUNK, n - start), g)
        return run

    sources = {
        "float64 uniform_ (53-bit uniforms, one per value)": chunked(
            lambda k, g: torch.empty(k, dtype=torch.float64).uniform_(generator=g)),
        "float64 Box-Muller in torch ops (normal64)": chunked(lambda k, g: normal64(k, like, g)),
        "torch's float64 normal_": chunked(
            lambda k, g: torch.empty(k, dtype=torch.float64).normal_(generator=g)),
        "float32 normal_ (16-bit outputs' source)": chunked(
            lambda k, g: torch.empty(k, dtype=torch.float32).normal_(generator=g)),
    }
    calls = {f"torch trunc_normal_ {d}": (lambda g, dt=dt: torch.nn.init.trunc_normal_(
        torch.empty(n, dtype=dt), m, s, a, b, generator=g)) for d, dt in DTYPES.items()}
    calls.update({f"fast-exact {d}": (lambda g, dt=dt: resolve("fast-exact")(
        torch.empty(n, dtype=dt), m, s, a, b, generator=g)) for d, dt in DTYPES.items()})
    everything = {**calls, **sources}
    times: dict[str, list[float]] = {k: [] for k in everything}
    for rep in range(reps):
        for k, f in everything.items():
            g = torch.Generator().manual_seed(rep)
            t0 = time.process_time()
            f(g)
            times[k].append(time.process_time() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["torch trunc_normal_ float32"]
    print(f"\n### the floor: the trap, 2^{round(math.log2(n))} elements, 1 thread (sources drawn in "
          f"chunks of 2^{round(math.log2(CHUNK))})\n")
    print("| call | ns/el | / torch's float32 trap call |")
    print("|---|---|---|")
    for k, v in med.items():
        print(f"| {k} | {fmt_ns(v, n)} | {v / base:.2f} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table-size", type=int, default=22, help="log2 elements of the side-by-side table")
    p.add_argument("--sizes", default="16,18,20,22,24", help="log2 sizes of the by-size table")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--slow", type=float, default=3.0, help="a call slower than this is measured once")
    p.add_argument("--cap", type=float, default=15.0, help="no larger size after a call this slow")
    p.add_argument("--quick", action="store_true", help="2^18 elements, 2 reps, sizes 2^16..2^20")
    p.add_argument("--skip", default="", help="comma-separated tables to skip: side,sizes,floor")
    p.add_argument("--device", default="cpu", help="where the tensors live (cuda: the floor table "
                   "is skipped, it times CPU sources)")
    p.add_argument("--candidates", default=",".join(CANDIDATES),
                   help="the side-by-side table's candidates (fast-exact and torch always)")
    p.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    args = p.parse_args(argv)
    DEVICE["name"] = args.device
    for name in set(CASES) - set(filter(None, args.cases.split(","))) if args.cases else ():
        del CASES[name]
    names = tuple(dict.fromkeys(("fast-exact", "torch", *args.candidates.split(","))))
    if args.quick:
        args.table_size, args.reps, args.sizes = 18, 2, "16,18,20"
    skip = set(filter(None, args.skip.split(",")))
    all_threads = torch.get_num_threads()
    n = 2**args.table_size
    sizes = [int(k) for k in args.sizes.split(",")]
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, all threads = {all_threads}; "
          f"n = 2^{args.table_size}, median of {args.reps} interleaved reps; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    capped: set = set()
    t0 = time.time()
    if "floor" not in skip and args.device == "cpu":
        floor(n, max(args.reps, 5))
    if "side" not in skip:
        rows1 = side_by_side(names, n, 1, args, capped)
        print_table(rows1, names, f"side by side, 2^{args.table_size} elements, 1 thread")
    if "sizes" not in skip:
        counts = (1, all_threads) if all_threads > 1 and args.device == "cpu" else (1,)
        rows2 = by_size(sizes, counts, args, capped)
        print_by_size(rows2, sizes)
        print("\n### targets\n")
        for line in verdicts(rows2):
            print("- " + line)
    print(f"\n(wall {time.time() - t0:.0f} s; load average now "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
