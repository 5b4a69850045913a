"""Speed of building the reference's rounded law for a new case: the figures the README quotes.

What is timed is everything a run asks of `reference.rounded_law(TruncatedNormal(mean, std, a, b),
dtype)` for one (case, dtype) before the first sample is folded (`harness.runner.CaseRunner.law`,
`harness.engine.Fold`, the checks' `LawBins` / `LocalBins`): the law itself (bounds, boundary
atoms, support), ``hist_bin_probs()`` (2**20 ordered-key bin masses for 32/64-bit, every atom for
16-bit), ``fine_bins`` / ``fine_bin_probs()`` / ``fine_bin_bounds()`` for a narrow law,
``mass_bins`` (32/64-bit), the moments (mean, std, skewness, kurtosis, central moments to 8) and
``collision_prob``.

* **cold**: the first law of its dtype in a fresh process (subprocess): it also pays the per-format
  tables that are built once per process (cell edges of every histogram bin, lattice tables).
* **warm**: a new, uncached case of the same kind and dtype in that process afterwards (parameters
  perturbed, so nothing of the case is cached): the per-(case, dtype) cost. Median and worst of
  ``--repeat`` new cases; for the random kind each new case is a fresh random draw.

Case kinds: ``grid`` (normal-2sigma, N(0, 1) on +-2), ``far-tail`` ([30 sigma, inf)), ``narrow``
(a window 1e-6 sigma wide at 8 sigma), ``random`` (what the explorer draws: |mean| up to 1e4, std
1e-8 .. 1e4, standardized lower bound in [-40, 40] or -inf, width 1e-6 sigma .. inf; fixed seed).
Target (issue): warm <= 0.05 s for 32/64-bit. Wall clock and the process's CPU time are both shown:
on a shared machine (load above the core count) wall clock inflates, CPU time much less; the
verdict takes the lower of the two worst cases. Run: ``python benchmarks/reference_speed.py``
(``--breakdown`` adds where the warm time goes). One core (OMP/torch threads 1).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, _ROOT)

import numpy as np  # noqa: E402

TARGET_S = 0.05  # per new (case, dtype), 32/64-bit
DTYPES = ("float32", "float64", "bfloat16", "float16")
KINDS = ("grid", "far-tail", "narrow", "random")
STAGES = ("law", "hist", "fine", "mass_bins", "moments", "collision")


def random_case(rng) -> tuple:
    """(mean, std, a, b) as the explorer draws them."""
    mean = float(rng.choice([-1.0, 1.0]) * 10 ** rng.uniform(-3, 4))
    std = float(10 ** rng.uniform(-8, 4))
    alpha = float(rng.uniform(-40, 40)) if rng.uniform() > 0.1 else -np.inf
    width = float(10 ** rng.uniform(-6, 2)) if rng.uniform() > 0.1 else np.inf
    a = mean + alpha * std if np.isfinite(alpha) else -np.inf
    if np.isfinite(width):
        b = (a if np.isfinite(a) else mean) + width * std
    else:
        b = np.inf
    if not a < b:  # a window narrower than the double spacing at this mean: widen it
        b = np.nextafter(a, np.inf) if np.isfinite(a) else mean
    return mean, std, a, b


def case_of(kind: str, i: int, rng) -> tuple:
    """The i-th case of a kind (i = 0 is the cold one); i > 0 perturbs the parameters."""
    d = 1e-4 * i
    if kind == "grid":
        return (d, 1.0, -2.0 + d, 2.0 + d)
    if kind == "far-tail":
        return (d, 1.0, 30.0 + d, np.inf)
    if kind == "narrow":
        return (d, 1.0, 8.0 + d, 8.0 + d + 1e-6)
    return random_case(rng)


def touch(law) -> dict:
    """Ask the law for everything a run asks for; seconds per stage."""
    out = {}
    t = time.perf_counter()
    law.rn_a, law.rn_b, law.atom_a, law.atom_b, law.support_lo, law.support_hi
    out["law"] = time.perf_counter() - t
    t = time.perf_counter()
    law.hist_bin_probs()
    out["hist"] = time.perf_counter() - t
    t = time.perf_counter()
    if law.fine_bins is not None:
        law.fine_bin_probs()
        law.fine_bin_bounds()
    out["fine"] = time.perf_counter() - t
    t = time.perf_counter()
    law.mass_bins
    out["mass_bins"] = time.perf_counter() - t
    t = time.perf_counter()
    law.mean, law.std, law.skewness, law.kurtosis
    [law.central_moment(k) for k in range(9)]
    out["moments"] = time.perf_counter() - t
    t = time.perf_counter()
    law.collision_prob
    out["collision"] = time.perf_counter() - t
    return out


def one(dtype_name: str, kind: str, repeat: int, seed: int) -> dict:
    """In this (fresh) process: the cold law, then `repeat` warm ones."""
    import torch

    torch.set_num_threads(1)
    from reference import TruncatedNormal, rounded_law

    dtype = getattr(torch, dtype_name)
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(repeat + 1):
        mean, std, a, b = case_of(kind, i, rng)
        t, c = time.perf_counter(), time.process_time()
        law = rounded_law(TruncatedNormal(mean, std, a, b), dtype)
        stages = touch(law)
        total, cpu = time.perf_counter() - t, time.process_time() - c
        stages["law"] += total - sum(stages.values())
        runs.append({"case": [mean, std, a, b], "total": total, "cpu": cpu, "stages": stages})
    return {"dtype": dtype_name, "kind": kind, "cold": runs[0], "warm": runs[1:]}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dtypes", default=",".join(DTYPES))
    p.add_argument("--kinds", default=",".join(KINDS))
    p.add_argument("--repeat", type=int, default=7, help="warm cases per (dtype, kind)")
    p.add_argument("--seed", type=int, default=20240611, help="seed of the random cases")
    p.add_argument("--breakdown", action="store_true", help="median warm seconds per stage")
    p.add_argument("--json", help="also write the raw figures here")
    p.add_argument("--one", nargs=2, metavar=("DTYPE", "KIND"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], args.repeat, args.seed)))
        return 0

    results = []
    for dt in args.dtypes.split(","):
        for kind in args.kinds.split(","):
            cmd = [sys.executable, os.path.abspath(__file__), "--one", dt, kind,
                   "--repeat", str(args.repeat), "--seed", str(args.seed)]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=os.environ.copy())
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"rounded law of a new case, everything a run asks (hist + fine + mass bins + moments + "
          f"collisions); load average {load:.1f}")
    head = (f"{'dtype':<9} {'case':<9} {'cold s':>7} {'warm s':>7} {'worst':>7} {'cpu s':>7} {'worst':>7}"
            f"  target {TARGET_S} s")
    if args.breakdown:
        head += "   warm median by stage: " + " ".join(f"{s:>9}" for s in STAGES)
    print(head)
    worst_wide = 0.0
    for r in results:
        warm = np.array([w["total"] for w in r["warm"]])
        cpu = np.array([w["cpu"] for w in r["warm"]])
        med, worst = float(np.median(warm)), float(warm.max())
        wide = r["dtype"] in ("float32", "float64")
        if wide:
            worst_wide = max(worst_wide, min(worst, float(cpu.max())))
        verdict = ("ok" if min(worst, cpu.max()) <= TARGET_S else "SLOW") if wide else "-"
        line = (f"{r['dtype']:<9} {r['kind']:<9} {r['cold']['total']:7.3f} {med:7.3f} {worst:7.3f} "
                f"{float(np.median(cpu)):7.3f} {float(cpu.max()):7.3f}  {verdict}")
        if args.breakdown:
            st = {s: float(np.median([w["stages"][s] for w in r["warm"]])) for s in STAGES}
            line += "       " + " ".join(f"{st[s]:9.4f}" for s in STAGES)
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if worst_wide <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
