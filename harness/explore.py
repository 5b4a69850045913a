"""The whole parameter space: `--explore N` draws N cases from a documented distribution over
TN(mean, std, a, b), low-discrepancy (a scrambled Sobol sequence, `scipy.stats.qmc`), so N of them
cover the space evenly and the same seed gives the same cases.

The distribution, in standardized bounds alpha = (a - mean) / std and beta = (b - mean) / std:

* std: log-uniform on [1e-8, 1e4];
* mean: either sign with probability 1/2 each, |mean| log-uniform on [1e-4, 1e4];
* alpha: -inf with probability 1/8, else uniform on [-40, 40];
* beta: for a finite alpha, +inf with probability 1/8, else alpha + w with the window width w
  log-uniform on [1e-6, 80] (a beta beyond 40 becomes +inf); for alpha = -inf, +inf with
  probability 1/8 (the untruncated law), else uniform on [-40, 40];
* a = mean + alpha std and b = mean + beta std in float64; a window narrower than float64
  resolves there (a == b after rounding) is widened to one float64 ulp, b = next_up(a): the
  narrowest window there is (a point is no truncated normal; `arguments` checks a == b).

So windows fall on either side of the mean or around it, from 1e-6 sigma wide to unbounded, up to
40 sigma out, and the lattice of every dtype meets every scale of sigma.

Error control: an exploration is a family of N x dtypes groups with a stated family-wise
false-alarm rate `EXPLORE_FWER`. A statistical check fails an exact sampler with probability at
most `harness.error_control.per_check_rate` (its stage-1 p below alpha_decide, or both stages
below their levels); the explored groups get the alpha_fail at which that rate is
``EXPLORE_FWER / (groups x statistical checks)`` (`explore_alpha_fail`; alpha_decide follows it),
and the union bound holds the whole exploration at EXPLORE_FWER. The hard checks (finite, bounds, written, ...) cannot
fail a correct sampler at all.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .cases import DEFAULT_SHAPE, Case, case_spec
from .error_control import alpha_fail_for

#: The family-wise false-alarm rate of one exploration (all N x dtypes groups, every check).
EXPLORE_FWER = 1e-7
#: The parameter ranges of the design (see the module docstring).
STD_LOG10 = (-8.0, 4.0)
MEAN_LOG10 = (-4.0, 4.0)
BOUND_RANGE = 40.0
WIDTH_LOG10 = (-6.0, math.log10(80.0))
INFINITE_SHARE = 1.0 / 8.0


def _uniform(u: float, lo: float, hi: float) -> float:
    return lo + (hi - lo) * u


def _finite_part(u: float) -> float:
    """u in [INFINITE_SHARE, 1) mapped to [0, 1)."""
    return (u - INFINITE_SHARE) / (1.0 - INFINITE_SHARE)


def point(u) -> dict:
    """The parameters of one point u in [0, 1)^5 of the design (see the module docstring), as
    Python floats."""
    u = [float(x) for x in u]
    std = 10.0 ** _uniform(u[0], *STD_LOG10)
    magnitude = 10.0 ** _uniform((2.0 * u[1]) % 1.0, *MEAN_LOG10)
    mean = -magnitude if u[1] < 0.5 else magnitude
    if u[2] < INFINITE_SHARE:
        alpha = -math.inf
        beta = math.inf if u[3] < INFINITE_SHARE else _uniform(_finite_part(u[3]), -BOUND_RANGE, BOUND_RANGE)
    else:
        alpha = _uniform(_finite_part(u[2]), -BOUND_RANGE, BOUND_RANGE)
        if u[3] < INFINITE_SHARE:
            beta = math.inf
        else:
            beta = alpha + 10.0 ** _uniform(_finite_part(u[3]), *WIDTH_LOG10)
            if beta > BOUND_RANGE:
                beta = math.inf
    return {"mean": float(mean), "std": float(std), "alpha": float(alpha), "beta": float(beta)}


def bounds(mean: float, std: float, alpha: float, beta: float) -> tuple[float, float]:
    """(a, b) = (mean + alpha std, mean + beta std), ±inf kept; b = next_up(a) where they round
    to one float64."""
    a = alpha if math.isinf(alpha) else mean + alpha * std
    b = beta if math.isinf(beta) else mean + beta * std
    if a == b:  # narrower than float64 resolves here: the narrowest window instead of a point
        b = math.nextafter(a, math.inf)
    return a, b


def explore_alpha_fail(groups: int, checks: int, alpha_suspect: float, default: float,
                       fwer: float = EXPLORE_FWER) -> float:
    """The stage-2 level that holds `groups` x `checks` two-stage tests at `fwer` (union bound),
    never looser than `default`."""
    return min(default, alpha_fail_for(fwer / max(1, groups * checks), alpha_suspect))


def explored_cases(n: int, seed: int, alpha_fail: float | None = None) -> list[Case]:
    """The `n` cases of exploration `seed` (ids ``explore-<seed>-<i>``), at the grid's shape."""
    from scipy.stats import qmc

    engine = qmc.Sobol(d=5, scramble=True, seed=int(seed) % (1 << 63))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a count that is not a power of 2 is fine here
        design = engine.random(n) if n else np.zeros((0, 5))
    out = []
    for i, u in enumerate(design):
        p = point(u)
        a, b = bounds(p["mean"], p["std"], p["alpha"], p["beta"])
        case_id = f"explore-{seed}-{i:04d}"
        spec = case_spec(p["mean"], p["std"], a, b, DEFAULT_SHAPE, case_id)
        out.append(Case(case_id, p["mean"], p["std"], a, b, DEFAULT_SHAPE, ("explore",),
                        f"explored point {i} of seed {seed}", spec=spec, own_shape=True,
                        alpha_fail=alpha_fail))
    return out
