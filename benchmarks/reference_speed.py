"""Speed of the reference's rounded law (issue 2, part 4): the figures the README quotes.

Targets, one core: `rounded_law(d, torch.bfloat16)` with every atom < 0.5 s, and the 2**20 bin
probabilities of a float32 histogram (`hist_bin_probs`, i.e. `bin_probs` over 2**20 bins) < 0.5 s.
"Cold" includes the one-off per-format tables (lattice cells, histogram bin edges), "warm" a new law
on a format already in use. Run: ``python benchmarks/reference_speed.py``.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

from reference import TruncatedNormal, float_format  # noqa: E402
from reference import rounded as _rounded  # noqa: E402

TARGET_S = 0.5


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _best(fn, repeat=3):
    return min(_timed(fn)[0] for _ in range(repeat))


def main() -> int:
    rows = []
    # Fresh laws every time (the module caches laws per parameters): vary the mean a little.
    means = iter(np.linspace(0.0, 1e-3, 64))

    def bf16_law():
        law = _rounded.RoundedLaw(TruncatedNormal(next(means), 1.0, -np.inf, np.inf), float_format(torch.bfloat16))
        return len(law.values)

    cold, n_atoms = _timed(bf16_law)
    rows.append(("rounded_law bf16, N(0,1) all atoms", f"{n_atoms} atoms", cold, _best(bf16_law)))

    def bf16_vit():
        law = _rounded.RoundedLaw(TruncatedNormal(next(means) * 1e-3, 0.02, -0.04, 0.04), float_format(torch.bfloat16))
        return len(law.values)

    rows.append(("rounded_law bf16, ViT N(0,.02) [-.04,.04]", f"{bf16_vit()} atoms", np.nan, _best(bf16_vit)))

    for dtype, case in ((torch.float32, (0.0, 1.0, -2.0, 2.0)), (torch.float32, (0.0, 0.02, -2.0, 2.0)), (torch.float64, (0.0, 1.0, -2.0, 2.0))):
        fmt = float_format(dtype)

        def hist():
            mu, sd, a, b = case
            law = _rounded.RoundedLaw(TruncatedNormal(mu + next(means) * sd, sd, a, b), fmt)
            h = law.hist_bin_probs()
            return int(np.count_nonzero(h))

        cold, live = _timed(hist)
        rows.append((f"hist_bin_probs {fmt.name} (2^20 bins), TN{case}", f"{live} bins > 0", cold, _best(hist)))

    lo, hi = float_format(torch.float32).hist_bin_bounds()
    law = _rounded.RoundedLaw(TruncatedNormal(0.0, 1.0, -2.0, 2.0), float_format(torch.float32))
    ok = ~np.isnan(lo)
    rows.append(("bin_probs float32 over 2^20 given bins", f"{int(ok.sum())} bins", np.nan, _best(lambda: law.bin_probs(lo[ok], hi[ok]))))

    w = max(len(r[0]) for r in rows)
    print(f"{'what':<{w}}  {'size':>18}  {'cold s':>7}  {'warm s':>7}  target {TARGET_S} s")
    worst = 0.0
    for name, size, c, wm in rows:
        cs = "" if np.isnan(c) else f"{c:7.3f}"
        print(f"{name:<{w}}  {size:>18}  {cs:>7}  {wm:7.3f}  {'ok' if wm < TARGET_S else 'SLOW'}")
        worst = max(worst, wm)
    return 0 if worst < TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
