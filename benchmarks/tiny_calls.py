"""The engine's cost per candidate call on tiny tensors: the figure that decides how many calls a
tiny shape class can afford, hence the n it reaches.

For each shape class, `harness.engine.run_engine` draws `--calls` calls of the candidate on the
normal-2sigma law (the shape axis's own case) and folds them; the wall time minus the candidate's
own time is the harness's overhead. Printed per shape: calls, n reached, candidate µs per call,
harness µs per call, and the harness's share.

    python benchmarks/tiny_calls.py                       # torch, float32, 4096 calls per shape
    python benchmarks/tiny_calls.py --candidate exact --dtype bfloat16 --calls 1024
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

from candidates import resolve  # noqa: E402
from harness.cases import SHAPE_CLASSES, case_by_id, shaped  # noqa: E402
from harness.checks import CHECKS  # noqa: E402
from harness.engine import run_engine  # noqa: E402
from reference import TruncatedNormal, rounded_law  # noqa: E402
from reference.dtypes import DTYPES  # noqa: E402

DEFAULT_SHAPES = ("1", "7", "3x5x5", "768", "1x1x768", "61x67", "4096")


def measure(candidate, shape_name: str, dtype, calls: int) -> dict:
    case = shaped(case_by_id("normal-2sigma"), SHAPE_CLASSES[shape_name])
    law = rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), dtype)
    numel = max(1, case.numel)
    run_engine(candidate, case, dtype, "cpu", law, 2 * numel, seed=0, families=CHECKS.families())  # warm: first-call costs
    t0 = time.perf_counter()
    s = run_engine(candidate, case, dtype, "cpu", law, calls * numel, seed=1,
                   families=CHECKS.families())
    wall = time.perf_counter() - t0
    made = max(1, int(s.n) // numel)
    harness_s = max(0.0, wall - s.candidate_s)
    return {"shape": shape_name, "calls": made, "n": int(s.n),
            "candidate_us": 1e6 * s.candidate_s / made, "harness_us": 1e6 * harness_s / made,
            "share": harness_s / wall if wall else 0.0}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--candidate", default="torch")
    p.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    p.add_argument("--calls", type=int, default=4096)
    p.add_argument("--shapes", default=",".join(DEFAULT_SHAPES))
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    cand, dtype = resolve(args.candidate), DTYPES[args.dtype]
    print(f"{args.candidate} {args.dtype}, {args.calls} calls per shape, {args.threads} thread(s), "
          f"torch {torch.__version__}")
    print(f"{'shape':>10} {'calls':>6} {'n':>9} {'candidate us/call':>18} {'harness us/call':>16} "
          f"{'harness share':>13}")
    for name in args.shapes.split(","):
        r = measure(cand, name, dtype, args.calls)
        print(f"{r['shape']:>10} {r['calls']:>6} {r['n']:>9} {r['candidate_us']:>18.1f} "
              f"{r['harness_us']:>16.1f} {r['share']:>13.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
