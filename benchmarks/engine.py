"""Is the harness cheap next to the samplers it tests? The engine benchmark.

For each dtype, n and candidate, on one case (default ``normal-2sigma``, N(0,1) on +-2 sigma,
shape 256x256), a fresh subprocess (``--one``) does what `harness.runner.CaseRunner` does for stage 1
of a case, and times every piece:

1. ``law_s``: ``reference.rounded_law`` of the case, its mass bins and its collision probability
   (32/64-bit: the engine's mass bins and collision blocks come from them), plus the
   first-use tables the checks build on that law (the first pass of the checks minus the second;
   see 3). Paid once per case, not per n.
2. ``run_engine(...)`` with the harness's own stage-1 seed, chunk size and timeout. It times
   itself: ``candidate_s`` is the time inside the candidate's calls (filling the case's 256x256
   tensor again and again), ``engine_s`` everything else (poisoning, copying into the chunk
   buffer, folding chunks into the Summary).
3. ``checks_s``: every statistical check (``harness.checks.CHECKS.outcomes()``) called on that
   Summary and law, ``fn(summary, law, alpha=1e-3)``, second pass (law tables warm).
4. ``peak RSS``: the subprocess's ``ru_maxrss`` right after 1-3, i.e. the high-water mark of the
   harness itself (imports included); nothing from other measurements carries over.
5. ``naive_s``: the baseline a person without the harness would write, on the *same* samples: the
   candidate, seeded identically, fills a preallocated tensor of all n samples (not timed), then
   the timed part: a float64 copy to numpy, ``scipy.stats.kstest`` against the continuous
   ``scipy.stats.truncnorm`` cdf, and ``numpy.histogram`` with 2**16 bins. ``naive RSS`` is the
   subprocess's peak after it (n samples + the float64 copy + kstest's sort and cdf arrays:
   ~200 B/sample, so by default it is skipped where that exceeds 4 GB, i.e. at n = 1e8).

Reading the table: ``harness_s = engine_s + checks_s`` is what the harness adds to a case on top of
the candidate's own ``candidate_s``; ``ratio = harness_s / candidate_s`` (target <= 0.25 at n = 1e8
float32 for the default ``torch`` candidate). ``n`` is the number of samples actually drawn (whole
calls: ceil(n / 65536) x 65536). ``law_s`` is constant in n and excluded from ``harness_s``.
Below the table: the fitted exponent of time vs n (log-log least squares; 1 means linear), the
issue's targets marked met / not met with their figures, and the machine the figures come from.
All times are wall clock: run it on a quiet machine. With torch threads >= busy cores every parallel
op can wait a scheduler slice, and times inflate many-fold (the report prints the load average and
flags a busy start); ``--repeat R`` keeps the fastest of R; ``--threads 1`` is the steadiest view of
the per-sample cost when the machine is shared.

Run::

    python benchmarks/engine.py                                   # 1e6,1e7,1e8; float32,bfloat16; torch,exact
    python benchmarks/engine.py --sizes 1e6,4e6 --out /tmp/engine_bench.md
    python benchmarks/engine.py --profile-fold 4e6 --dtypes float32    # torch.profiler, by chunk
    python benchmarks/engine.py --one float32 1e6 torch                # one measurement, a JSON line
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

MARK = "ENGINE_BENCH_JSON "
NAIVE_BINS = 1 << 16
# Peak memory of the naive baseline per sample, measured (n = 1e6..4e6, float32/bfloat16): the n
# samples, the float64 copy, kstest's sorted copy and cdf values, and scipy.stats.truncnorm.cdf's
# float64 temporaries. ~20 GB at n = 1e8, so it is skipped there unless --naive-max-gb allows.
NAIVE_BYTES_PER_SAMPLE = 210
TARGET_RATIO = 0.25  # harness_s <= 0.25 x the default candidate's generation time, n = 1e8 float32
TARGET_RSS_FACTOR = 1.5  # RSS(1e8) <= 1.5 x RSS(1e6) + one chunk
TARGET_N = 10**8


def _parse_n(text: str) -> int:
    value = float(text)
    if not (value >= 1 and value == int(value)):
        raise argparse.ArgumentTypeError(f"not a sample count: {text!r}")
    return int(value)


def _n_label(n: int) -> str:
    exp = int(math.floor(math.log10(n)))
    mant = n / 10**exp
    return f"{mant:g}e{exp}" if mant == int(mant) else str(n)


def _maxrss_mb() -> float:
    # Linux: kilobytes; macOS: bytes.
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1 << 20) if sys.platform == "darwin" else rss / 1024


def _set_threads(threads: int) -> int:
    import torch

    torch.set_num_threads(threads)
    return torch.get_num_threads()


# ---------------------------------------------------------------------------------------------
# One measurement (runs in its own subprocess)
# ---------------------------------------------------------------------------------------------

def measure_one(dtype_name: str, n: int, candidate_name: str, case_id: str, threads: int,
                chunk_elements: int, naive: bool, device: str = "cpu") -> dict:
    import torch

    from candidates import resolve
    from harness.cases import PROFILES, case_by_id
    from harness.checks import CHECKS
    from harness.engine import run_engine
    from harness.runner import RunConfig
    from harness.seeds import DEFAULT_RUN_SEED, derive_seed
    from reference import TruncatedNormal, rounded_law

    torch_threads = _set_threads(threads)
    dtype = getattr(torch, dtype_name)
    case = case_by_id(case_id)
    cand = resolve(candidate_name)
    config = RunConfig(profile="pr", samples=n, chunk_elements=chunk_elements)
    seed = derive_seed(config.run_seed, cand.spec, case.id, dtype_name, device, 1)
    out = dict(dtype=dtype_name, n_requested=n, candidate=candidate_name, case=case.id,
               device=device, torch_threads=torch_threads, run_seed=DEFAULT_RUN_SEED, seed=seed,
               rss_imports_mb=_maxrss_mb())

    t0 = time.perf_counter()
    law = rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), dtype)
    law.mass_bins  # built once per case (32/64-bit); the engine would otherwise build it untimed
    law.collision_prob  # once per case too: the engine's collision block size comes from it
    out["law_build_s"] = time.perf_counter() - t0

    summary = run_engine(cand, case, dtype, device, law, config.n(1), seed,
                         families=CHECKS.families(), call_timeout=config.case_timeout,
                         chunk_elements=config.chunk_elements,
                         min_calls=PROFILES[config.profile].min_calls)
    numel = max(1, math.prod(case.shape))
    per_chunk = max(1, min(summary.n_calls, config.chunk_elements // numel))
    out.update(n=int(summary.n), n_calls=int(summary.n_calls), candidate_s=summary.candidate_s,
               engine_s=summary.engine_s, chunk_elements=per_chunk * numel,
               chunk_mb=per_chunk * numel * torch.finfo(dtype).bits / 8 / 2**20)

    # Checks: a cold pass (as the first Summary of a case pays it: law tables built on first use)
    # and a warm one (the per-Summary cost). Outcomes are kept as a sanity note, not judged here.
    checks_cold, checks_warm, verdicts = {}, {}, {}
    for passes, times in ((1, checks_cold), (2, checks_warm)):
        for name, fn in CHECKS.outcomes().items():
            t0 = time.perf_counter()
            try:
                o = fn(summary, law, alpha=config.alpha_fail)
                if passes == 1:
                    verdicts[name] = (None if not getattr(o, "applicable", True)
                                      else float(o.p_value))
            except Exception as exc:  # a check still being written must not sink the benchmark
                verdicts[name] = f"error: {type(exc).__name__}: {exc}"[:200]
            times[name] = time.perf_counter() - t0
    out["n_checks"] = len(CHECKS.outcomes())
    out["checks_cold_s"] = sum(checks_cold.values())
    out["checks_s"] = sum(checks_warm.values())
    out["checks_each_s"] = checks_warm
    out["checks_first_use_s"] = max(0.0, out["checks_cold_s"] - out["checks_s"])
    out["check_p_values"] = verdicts
    out["law_s"] = out["law_build_s"] + out["checks_first_use_s"]
    out["harness_s"] = out["engine_s"] + out["checks_s"]
    out["ratio"] = out["harness_s"] / out["candidate_s"] if out["candidate_s"] > 0 else math.nan
    out["rss_mb"] = _maxrss_mb()

    if naive:
        naive_baseline(out, cand, case, dtype, seed, float(summary.support.min),
                       float(summary.support.max), device)
    return out


def naive_baseline(out: dict, cand, case, dtype, seed: int, summary_min: float,
                   summary_max: float, device: str = "cpu") -> None:
    """The naive analysis on the same samples the engine saw; fills naive_* keys of `out`."""
    import numpy as np
    import scipy.stats
    import torch

    calls = out["n_calls"]
    samples = torch.empty((calls, *case.shape), dtype=dtype, device=device)
    generator = torch.Generator(device=device).manual_seed(seed)
    t0 = time.perf_counter()
    for i in range(calls):  # the engine's call sequence: same generator, same shapes
        cand(samples[i], case.mean, case.std, case.a, case.b, generator)
    if samples.device.type == "cuda":
        torch.cuda.synchronize(samples.device)
    out["naive_gen_s"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    x = samples.reshape(-1).to(torch.float64).cpu().numpy()
    t1 = time.perf_counter()
    alpha, beta = (case.a - case.mean) / case.std, (case.b - case.mean) / case.std
    ks = scipy.stats.kstest(x, scipy.stats.truncnorm(alpha, beta, loc=case.mean, scale=case.std).cdf)
    t2 = time.perf_counter()
    np.histogram(x, bins=NAIVE_BINS)
    t3 = time.perf_counter()
    out.update(naive_s=t3 - t0, naive_copy_s=t1 - t0, naive_kstest_s=t2 - t1,
               naive_hist_s=t3 - t2, naive_ks_p=float(ks.pvalue),
               naive_same_samples=bool(x.size == out["n"] and float(x.min()) == summary_min
                                       and float(x.max()) == summary_max),
               naive_rss_mb=_maxrss_mb())


# ---------------------------------------------------------------------------------------------
# Profile one fold (in this process)
# ---------------------------------------------------------------------------------------------

def profile_fold(dtype_name: str, n: int, case_id: str, threads: int, candidate_name: str,
                 chunk_elements: int, rows: int = 25) -> str:
    """torch.profiler over the fold of n samples, in the engine's chunks of `chunk_elements`
    (whole calls, as `run_engine` folds them: one huge chunk would leave the caches and profile
    another cost), and its `finish`; per-family wall times too."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from candidates import resolve
    from harness.cases import case_by_id
    from harness.checks import CHECKS
    from harness.engine import Fold, new_summary
    from reference import TruncatedNormal, rounded_law

    torch_threads = _set_threads(threads)
    dtype = getattr(torch, dtype_name)
    case = case_by_id(case_id)
    numel = max(1, math.prod(case.shape))
    calls = max(1, n // numel)
    law = rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), dtype)
    cand = resolve(candidate_name)
    gen = torch.Generator().manual_seed(1)
    batch = torch.empty((calls, *case.shape), dtype=dtype)
    for i in range(calls):
        cand(batch[i], case.mean, case.std, case.a, case.b, gen)

    def new_fold():
        return Fold(new_summary(law, tuple(case.shape), dtype), dtype, torch.device("cpu"), law,
                    families=CHECKS.families())

    per_chunk = max(1, min(calls, chunk_elements // numel))

    def fold_all(fold):
        for start in range(0, calls, per_chunk):
            fold.fold(batch[start:start + per_chunk])
        fold.finish()

    fold_all(new_fold())  # warm-up (first-call allocations, caches)
    t0 = time.perf_counter()
    fold_all(new_fold())
    plain_s = time.perf_counter() - t0

    # Per-family wall times: wrap each accumulator's fold (on this instance only; the engine is
    # untouched). What families share of a chunk (bins, z, ...) counts to the first that asks.
    steps: dict = {}
    f = new_fold()

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            with record_function(f"fold.{name}"):
                t = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    steps[name] = steps.get(name, 0.0) + time.perf_counter() - t
        return wrapper

    for name, accumulator in f.accumulators.items():
        accumulator.fold = timed(name, accumulator.fold)
        accumulator.finish = timed(name, accumulator.finish)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        t0 = time.perf_counter()
        fold_all(f)
        profiled_s = time.perf_counter() - t0
    lines = [f"## The fold of {calls * numel} {dtype_name} samples ({calls} calls of "
             f"{'x'.join(map(str, case.shape))}, case {case.id}, in chunks of {per_chunk} calls), "
             f"torch threads {torch_threads}",
             "",
             f"fold wall time: {plain_s:.3f} s without the profiler ({plain_s / (calls * numel) * 1e9:.1f} "
             f"ns/sample), {profiled_s:.3f} s under it",
             "",
             "| family (fold and finish) | wall s | share |", "|---|---:|---:|"]
    for name, sec in sorted(steps.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {name} | {sec:.3f} | {sec / profiled_s:.0%} |")
    rest = profiled_s - sum(steps.values())
    lines.append(f"| rest (the loop itself) | {rest:.3f} | {rest / profiled_s:.0%} |")
    lines += ["", "```",
              prof.key_averages(group_by_input_shape=True).table(
                  sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=40,
                  max_shapes_column_width=40),
              "```"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The driver: one subprocess per measurement, then the report
# ---------------------------------------------------------------------------------------------

def run_child(dtype: str, n: int, cand: str, args) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--one", dtype, str(n), cand,
           "--case", args.case, "--threads", str(args.threads),
           "--chunk-elements", str(args.chunk_elements), "--device", args.device]
    naive_gb = n * NAIVE_BYTES_PER_SAMPLE / 1e9
    skip_naive = None
    if args.no_naive:
        skip_naive = "--no-naive"
    elif naive_gb > args.naive_max_gb:
        skip_naive = f"needs ~{naive_gb:.2g} GB > --naive-max-gb {args.naive_max_gb:g}"
    if skip_naive:
        cmd.append("--no-naive")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(MARK):
            out = json.loads(line[len(MARK):])
            out["wall_s"] = wall
            if skip_naive:
                out["naive_skipped"] = skip_naive
            return out
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return dict(dtype=dtype, n_requested=n, candidate=cand, case=args.case, wall_s=wall,
                error=f"rc {proc.returncode}: " + " | ".join(tail)[-400:])


def best_of(runs: list) -> dict:
    """Fastest of the repeats per time column, largest peak RSS."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[-1]
    out = dict(min(ok, key=lambda r: r["harness_s"]))
    for key in ("candidate_s", "engine_s", "checks_s", "law_s", "naive_s", "naive_kstest_s",
                "naive_hist_s", "naive_copy_s"):
        vals = [r[key] for r in ok if key in r]
        if vals:
            out[key] = min(vals)
    out["harness_s"] = out["engine_s"] + out["checks_s"]
    out["ratio"] = out["harness_s"] / out["candidate_s"] if out["candidate_s"] > 0 else math.nan
    for key in ("rss_mb", "naive_rss_mb"):
        vals = [r[key] for r in ok if key in r]
        if vals:
            out[key] = max(vals)
    out["repeats"] = len(ok)
    return out


def fit_exponent(points: list) -> float:
    """Least-squares slope of log(time) against log(n)."""
    pts = [(math.log(n), math.log(t)) for n, t in points if n > 0 and t > 0]
    if len(pts) < 2:
        return math.nan
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx > 0 else math.nan


def _loadavg() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


def machine_facts(threads: int, load_start: str) -> list:
    import numpy
    import scipy
    import torch

    model = "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = "unknown"
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal"):
                    mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                    break
    except OSError:
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    backend = next((line.split(":", 1)[1].strip() for line in
                    torch.__config__.parallel_info().splitlines()
                    if line.startswith("ATen parallel backend")), "unknown")
    return [
        f"- CPU: {model}; {os.cpu_count()} logical cores ({affinity} usable by this process); "
        f"memory {mem}",
        f"- torch {torch.__version__} ({threads} torch threads per measurement, parallel backend "
        f"{backend}), numpy {numpy.__version__}, scipy {scipy.__version__}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}",
        f"- load average (1, 5, 15 min): {load_start} at the start, {_loadavg()} at the end",
    ]


def _fmt_s(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v:.3f}" if v < 100 else f"{v:.1f}"


def report(results: list, args, total_wall: float, load_start: str) -> str:
    from harness.checks import CHECKS

    lines = [f"# Engine benchmark: case `{args.case}`, device {args.device}, torch threads "
             f"{args.threads}", ""]
    lines += [f"Statistical checks timed: {', '.join(CHECKS.outcomes())}.", ""]
    lines += ["| dtype | n | candidate | candidate_s | harness_s | ratio | engine_s | checks_s | "
              "law_s (once per case) | peak RSS MB | naive_s | naive RSS MB | naive / harness |",
              "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['dtype']} | {_n_label(r['n_requested'])} | {r['candidate']} | "
                         f"error: {r['error']} |")
            continue
        naive = r.get("naive_s")
        cells = [r["dtype"], f"{r['n']:,}", r["candidate"], _fmt_s(r["candidate_s"]),
                 _fmt_s(r["harness_s"]), f"{r['ratio']:.2f}", _fmt_s(r["engine_s"]),
                 _fmt_s(r["checks_s"]), _fmt_s(r["law_s"]), f"{r['rss_mb']:.0f}"]
        if naive is None:
            cells += [f"skipped ({r.get('naive_skipped', 'no naive')})", "-", "-"]
        else:
            cells += [_fmt_s(naive), f"{r['naive_rss_mb']:.0f}", f"{naive / r['harness_s']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    ok = [r for r in results if "error" not in r]

    # Growth with n
    lines += ["", "**Growth with n** (log-log least-squares exponent of time vs n; 1 = linear):", ""]
    for dtype in args.dtypes:
        for cand in args.candidates:
            pts = sorted((r["n"], r) for r in ok if r["dtype"] == dtype and r["candidate"] == cand)
            if len(pts) < 2:
                continue
            n0, r0 = pts[0]
            n1, r1 = pts[-1]
            e_h = fit_exponent([(n, r["harness_s"]) for n, r in pts])
            e_c = fit_exponent([(n, r["candidate_s"]) for n, r in pts])
            e_e = fit_exponent([(n, r["engine_s"]) for n, r in pts])
            lines.append(
                f"- {dtype}, {cand}: harness_s {_fmt_s(r0['harness_s'])} s -> {_fmt_s(r1['harness_s'])} s "
                f"for n {n0:,} -> {n1:,} ({n1 / n0:.1f}x n, {r1['harness_s'] / r0['harness_s']:.1f}x time): "
                f"exponent {e_h:.2f} (engine alone {e_e:.2f}; candidate {e_c:.2f})")

    # Targets
    lines += ["", "**Targets**:", ""]
    f32 = sorted((r["n"], r) for r in ok if r["dtype"] == "float32" and r["candidate"] == "torch")
    if f32:
        n_big, r = f32[-1]
        met = r["harness_s"] <= TARGET_RATIO * r["candidate_s"]
        with_law = (r["harness_s"] + r["law_s"]) / r["candidate_s"]
        where = ("" if n_big >= TARGET_N else
                 f" (**provisional**: measured at n = {n_big:,}; the target is stated at n = 1e8)")
        lines.append(
            f"- harness <= {TARGET_RATIO}x torch's generation, float32: **{'met' if met else 'not met'}**"
            f"{where}: harness {_fmt_s(r['harness_s'])} s vs {TARGET_RATIO} x {_fmt_s(r['candidate_s'])} s "
            f"= {_fmt_s(TARGET_RATIO * r['candidate_s'])} s (ratio {r['ratio']:.2f}; "
            f"{with_law:.2f} with the once-per-case law_s)")
    else:
        lines.append(f"- harness <= {TARGET_RATIO}x torch's generation at n = 1e8 float32: not measured "
                     "(needs --dtypes float32 --candidates torch)")
    for dtype in args.dtypes:
        for cand in args.candidates:
            pts = sorted((r["n"], r) for r in ok if r["dtype"] == dtype and r["candidate"] == cand)
            if len(pts) < 2:
                continue
            (n0, r0), (n1, r1) = pts[0], pts[-1]
            bound = TARGET_RSS_FACTOR * r0["rss_mb"] + r1["chunk_mb"]
            met = r1["rss_mb"] <= bound
            where = "" if n1 >= TARGET_N and n0 <= 10**6 else " (provisional: target is 1e8 vs 1e6)"
            lines.append(
                f"- peak RSS, {dtype}, {cand}: **{'met' if met else 'not met'}**{where}: "
                f"{r1['rss_mb']:.0f} MB at n = {n1:,} vs {TARGET_RSS_FACTOR} x {r0['rss_mb']:.0f} MB "
                f"(n = {n0:,}) + one chunk {r1['chunk_mb']:.0f} MB ({r1['chunk_elements']:,} elements) "
                f"= {bound:.0f} MB; growth {r1['rss_mb'] - r0['rss_mb']:+.0f} MB")
    lines.append("- the whole `pr` grid for one candidate <= 5 min on 2 cores: not measured here "
                 "(run `pytest suites -n 2` and read its duration)")

    notes = []
    for r in ok:
        bad = {k: v for k, v in r.get("check_p_values", {}).items() if isinstance(v, str)}
        if bad:
            notes.append(f"- {r['dtype']} {r['n']:,} {r['candidate']}: check errors {bad}")
        if "naive_same_samples" in r and not r["naive_same_samples"]:
            notes.append(f"- {r['dtype']} {r['n']:,} {r['candidate']}: the naive baseline's samples "
                         f"differ from the engine's (min/max/n mismatch)")
    if notes:
        lines += ["", "**Notes**:", ""] + notes

    lines += ["", "**Machine**:", ""] + machine_facts(args.threads, load_start)
    busy = load_start.split(",")[0]
    if busy != "n/a" and float(busy) > 0.5:
        lines.append(f"- **the machine was not quiet** (1-min load {busy} before the first "
                     f"measurement): with torch threads competing for busy cores, every parallel "
                     f"op can wait a scheduler slice; times may be inflated many-fold")
    lines += [f"- benchmark wall time {total_wall:.0f} s; command: "
              f"`python benchmarks/engine.py {' '.join(sys.argv[1:])}`"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1e6,1e7,1e8", help="comma-separated n (default 1e6,1e7,1e8)")
    p.add_argument("--dtypes", default="float32,bfloat16")
    p.add_argument("--candidates", default="torch,exact")
    p.add_argument("--case", default="normal-2sigma")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="torch threads in each measurement (default: all cores)")
    p.add_argument("--device", default="cpu",
                   help="where the candidate writes and the engine folds (cpu, cuda, cuda:1, ...)")
    p.add_argument("--chunk-elements", type=_parse_n, default=None,
                   help="engine chunk size (default: the harness's for --device, chunk_elements_for)")
    p.add_argument("--repeat", type=int, default=1, help="measurements per cell; keeps the fastest")
    p.add_argument("--no-naive", action="store_true", help="skip the naive baseline")
    p.add_argument("--naive-max-gb", type=float, default=4.0,
                   help=f"skip the naive baseline where its estimated peak memory "
                        f"({NAIVE_BYTES_PER_SAMPLE} B/sample) exceeds this (default 4 GB)")
    p.add_argument("--out", help="also write the markdown report to this file")
    p.add_argument("--json", help="also write the raw measurements to this file")
    p.add_argument("--one", nargs=3, metavar=("DTYPE", "N", "CANDIDATE"),
                   help="internal: one measurement in this process, printed as a JSON line")
    p.add_argument("--profile-fold", type=_parse_n, metavar="N",
                   help="profile the fold of N samples (first of --dtypes), in the engine's "
                        "chunks, with torch.profiler")
    args = p.parse_args(argv)
    if args.chunk_elements is None:
        from harness.engine import chunk_elements_for

        args.chunk_elements = chunk_elements_for(args.device)

    if args.one:
        dtype, n, cand = args.one
        out = measure_one(dtype, _parse_n(n), cand, args.case, args.threads, args.chunk_elements,
                          naive=not args.no_naive, device=args.device)
        print(MARK + json.dumps(out), flush=True)
        return 0

    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    args.candidates = [c.strip() for c in args.candidates.split(",") if c.strip()]
    sizes = sorted(_parse_n(s.strip()) for s in args.sizes.split(",") if s.strip())

    if args.profile_fold:
        cand = args.candidates[0] if args.candidates else "torch"
        text = profile_fold(args.dtypes[0], args.profile_fold, args.case, args.threads, cand,
                            args.chunk_elements)
        print(text)
        if args.out:
            with open(args.out, "w") as fh:
                fh.write(text + "\n")
        return 0

    load_start = _loadavg()
    t_start = time.perf_counter()
    results = []
    for dtype in args.dtypes:
        for n in sizes:
            for cand in args.candidates:
                runs = []
                for _ in range(max(1, args.repeat)):
                    print(f"[engine bench] {dtype} n={_n_label(n)} {cand} ...", file=sys.stderr,
                          flush=True)
                    runs.append(run_child(dtype, n, cand, args))
                    r = runs[-1]
                    print("[engine bench]   " + (r["error"] if "error" in r else
                          f"candidate {r['candidate_s']:.2f} s, harness {r['harness_s']:.2f} s, "
                          f"naive {r.get('naive_s', float('nan')):.2f} s, RSS {r['rss_mb']:.0f} MB, "
                          f"wall {r['wall_s']:.1f} s"), file=sys.stderr, flush=True)
                results.append(best_of(runs))
    text = report(results, args, time.perf_counter() - t_start, load_start)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
