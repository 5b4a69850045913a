"""Speed of the samplers side by side: the proposal `fast-exact` against torch's own `trunc_normal_`,
the gold sampler `exact` and the seed report's two workarounds (`fp32-upcast`, `rejection-loop`).

Three tables, each timing whole calls ``cand(tensor, mean, std, a, b, generator)`` on a fresh
contiguous tensor; for each cell the candidates are called in turn, repeated ``--reps`` times
(interleaved, so a load spike hits all of them alike), and the median is kept. Times are ns per
element: the process's CPU time with 1 thread (robust to other processes' load on a shared
machine), wall time with all threads; ``fast-exact / torch`` is the ratio of the medians (below 1:
faster than torch).

1. **side by side** at ``--table-size`` (default 2^22) elements, 1 thread: every candidate, on the
   grid's init cases (N(0,1) on +-2, the +-100 sigma trap, ViT's +-2 sigma at std 0.02), an
   asymmetric window [1, 3], a tail window [3, 10] and a narrow window [8, 8.01] (mean 0, std 1),
   float32 and bfloat16;
2. **all threads**: fast-exact and torch on the same cells with torch's default thread count;
3. **growth**: fast-exact and torch from 2^16 to 2^24 elements (1 thread): ns per element at each
   size and fast-exact's growth factor (ns/element at 2^24 over 2^16; 1 = linear in numel).

Targets (the proposal's): fast-exact <= 1.0x torch's time on the bulk cases (+-2 sigma, the trap,
ViT, the asymmetric window); >= 10x faster than torch on the tail window; cost linear in numel.
Each is printed with its verdict.

Bounded: a call slower than ``--slow`` seconds is measured once; a candidate whose call took longer
than ``--cap`` seconds is not run at larger sizes of that cell (shown as ``>cap``); rejection-loop
is not run where the window holds < 5% of N(mean, std) (it would draw ~1/P normals per element:
it hangs on the tail and narrow windows, which is its known defect). The machine this runs on is
shared: read the ratios, not the seconds.

    python benchmarks/samplers.py                     # the README's tables (~25 min on 2 busy cores)
    python benchmarks/samplers.py --quick             # 2^18 elements, 2 reps: a smoke run (~1 min)
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

#: name -> (mean, std, a, b, kind): kind is the target that applies (bulk, tail, narrow)
CASES = {
    "normal-2sigma": (0.0, 1.0, -2.0, 2.0, "bulk"),
    "abs-bounds-trap": (0.0, 0.02, -2.0, 2.0, "bulk"),
    "vit-pos-embed": (0.0, 0.02, -0.04, 0.04, "bulk"),
    "asym-window-1-3": (0.0, 1.0, 1.0, 3.0, "bulk"),
    "tail-3-10": (0.0, 1.0, 3.0, 10.0, "tail"),
    "narrow-window-8": (0.0, 1.0, 8.0, 8.01, "narrow"),
}
CANDIDATES = ("fast-exact", "torch", "exact", "fp32-upcast", "rejection-loop")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: rejection-loop draws ~1/P normals per element: not run below this window mass
REJECTION_MIN_MASS = 0.05


def window_mass(mean: float, std: float, a: float, b: float) -> float:
    """P(a <= X <= b) for X ~ N(mean, std^2) (rough: only to decide what to run)."""
    cdf = lambda x: 0.5 * math.erfc(-(x - mean) / (std * math.sqrt(2.0)))  # noqa: E731
    return cdf(b) - cdf(a)


def time_call(cand, n: int, dtype, params, seed: int) -> float:
    """Seconds of one call on a fresh tensor of n elements: the process's CPU time with one thread
    (what the call itself computed: another process's load hardly changes it), wall time with
    several (CPU time would add the threads up)."""
    t = torch.empty(n, dtype=dtype)
    g = torch.Generator().manual_seed(seed)
    clock = time.process_time if torch.get_num_threads() == 1 else time.perf_counter
    t0 = clock()
    cand(t, *params, generator=g)
    return clock() - t0


def measure(names, n: int, dtype, params, reps: int, slow: float, cap: float, capped: set,
            key) -> dict:
    """name -> median seconds (or None where skipped): the candidates interleaved, rep by rep."""
    times: dict[str, list[float]] = {name: [] for name in names}
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
            print("  " + " ".join(f"{x}={fmt_ns(med.get(x), n)}" for x in names), f"[{dname} {cname}]",
                  flush=True)
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


def verdicts(rows) -> list[str]:
    out = []
    for r in rows:
        fe, tt = r["fast-exact"], r["torch"]
        if fe is None or tt is None:
            out.append(f"{r['dtype']} {r['case']} ({r['threads']} thr): not measured")
            continue
        ratio = fe / tt
        if r["kind"] == "bulk":
            ok, target = ratio <= 1.0, "<= 1.0x torch"
        elif r["kind"] == "tail":
            ok, target = ratio <= 0.1, ">= 10x faster than torch"
        else:
            continue
        out.append(f"{'MET ' if ok else 'MISS'} {r['dtype']} {r['case']} ({r['threads']} thread(s)): "
                   f"fast-exact / torch = {ratio:.2f} (target {target})")
    return out


def growth(sizes, args, capped) -> None:
    torch.set_num_threads(1)
    names = ("fast-exact", "torch")
    print("\n### growth (1 thread): ns per element by size\n")
    header = "| dtype | case | candidate | " + " | ".join(f"2^{k}" for k in sizes) + " | growth |"
    print(header)
    print("|---|---|---|" + "---|" * len(sizes) + "---|")
    for dname, dtype in DTYPES.items():
        for cname in ("normal-2sigma", "abs-bounds-trap", "tail-3-10"):
            m, s, a, b, _ = CASES[cname]
            per = {x: [] for x in names}
            for k in sizes:
                med = measure(names, 2**k, dtype, (m, s, a, b), args.reps, args.slow, args.cap, capped,
                              (cname, dname, "growth"))
                for x in names:
                    per[x].append(None if med[x] is None else med[x] / 2**k)
            for x in names:
                vals = per[x]
                g = f"{vals[-1] / vals[0]:.2f}" if vals[0] and vals[-1] else "—"
                cells = ["—" if v is None else f"{1e9 * v:,.1f}" for v in vals]
                print(f"| {dname} | {cname} | {x} | " + " | ".join(cells) + f" | {g} |", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table-size", type=int, default=22, help="log2 elements of the side-by-side tables")
    p.add_argument("--sizes", default="16,18,20,22,24", help="log2 sizes of the growth table")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--slow", type=float, default=3.0, help="a call slower than this is measured once")
    p.add_argument("--cap", type=float, default=30.0, help="no larger size after a call this slow")
    p.add_argument("--quick", action="store_true", help="2^18 elements, 2 reps, growth 2^16..2^20")
    p.add_argument("--skip", default="", help="comma-separated tables to skip: side,threads,growth")
    args = p.parse_args(argv)
    if args.quick:
        args.table_size, args.reps, args.sizes = 18, 2, "16,18,20"
    skip = set(filter(None, args.skip.split(",")))
    all_threads = torch.get_num_threads()
    n = 2**args.table_size
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, all threads = {all_threads}; "
          f"n = 2^{args.table_size}, median of {args.reps} interleaved reps", flush=True)
    capped: set = set()
    rows: list[dict] = []
    t0 = time.time()
    if "side" not in skip:
        rows1 = side_by_side(CANDIDATES, n, 1, args, capped)
        print_table(rows1, CANDIDATES, f"side by side, 2^{args.table_size} elements, 1 thread")
        rows += rows1
    if "threads" not in skip:
        rows2 = side_by_side(("fast-exact", "torch"), n, all_threads, args, capped)
        print_table(rows2, ("fast-exact", "torch"),
                    f"fast-exact and torch, 2^{args.table_size} elements, {all_threads} threads")
        rows += rows2
    if rows:
        print("\n### targets\n")
        for line in verdicts(rows):
            print("- " + line)
    if "growth" not in skip:
        growth([int(k) for k in args.sizes.split(",")], args, capped)
    print(f"\n(wall {time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
