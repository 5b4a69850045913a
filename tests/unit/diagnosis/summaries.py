"""What the diagnosis tests share: a candidate's stage-1 Summary on a case, drawn by the real
runner, one match of the catalog by name, and what the tests of a library's repeated float32
kernels measure them with: their arguments, their error in ulps against mpmath, and the
comparison with the library bit for bit."""

from __future__ import annotations

import mpmath
import numpy as np

from candidates import resolve
from harness.cases import case_by_label
from harness.runner import CaseRunner, RunConfig


def stage_one(name: str, case: str, dtype, n: int, run_seed: int | None = None, **settings):
    """(runner, its stage-1 Summary) of `name` on `case` (`settings`: more of RunConfig)."""
    if run_seed is not None:
        settings["run_seed"] = run_seed
    config = RunConfig(samples=n, **settings)
    runner = CaseRunner(resolve(name), case_by_label(case), dtype, "cpu", config)
    summary = runner.summary(1)
    assert not isinstance(summary, Exception), summary
    return runner, summary


def named(matches, name):
    """The match called `name` among `matches` (a failed assertion listing them where none)."""
    found = [m for m in matches if m.name == name]
    assert found, f"{name} not among {[(m.name, m.note) for m in matches]}"
    return found[0]


def every_float32(lo: float, hi: float) -> np.ndarray:
    """Every float32 in [lo, hi] (0 <= lo <= hi), in order."""
    keys = np.array([lo, hi], dtype=np.float32).view(np.int32)
    return np.arange(keys[0], keys[1] + 1, dtype=np.int32).view(np.float32)


def assert_kernels_equal(cases, run) -> None:
    """Each (library function, its repetition, arguments) in `cases` gives the same float32
    values, the library's called through `run(function, float32 arguments)`."""
    for library, ours, xs in cases:
        xs = np.asarray(xs, dtype=np.float32)
        assert np.array_equal(np.asarray(run(library, xs)), ours(xs)), library


def arguments(lo: float, hi: float, n: int, seed: int) -> np.ndarray:
    """n float32 arguments uniform on [lo, hi] from a fixed seed."""
    return np.random.default_rng(seed).uniform(lo, hi, n).astype(np.float32)


def near_one(rng) -> np.ndarray:
    """float32 arguments below 1 where erfinv is far out: 1 - U(0, 3.4e-3) and 1 - 2^-k."""
    tail = (1.0 - np.concatenate([rng.uniform(0.0, 3.4e-3, 400),
                                  np.ldexp(1.0, -np.arange(9, 25))])).astype(np.float32)
    return tail[tail < 1]


def exact_values(fn, xs: np.ndarray) -> np.ndarray:
    """fn at each of xs in mpmath at 80 bits, as float64."""
    with mpmath.workprec(80):
        return np.array([float(fn(mpmath.mpf(float(x)))) for x in xs])


def ulps_off(got: np.ndarray, fn, xs: np.ndarray) -> np.ndarray:
    """|got - fn(x)| in float32 ulps of the exact value (`exact_values`)."""
    exact = exact_values(fn, xs)
    spacing = np.spacing(np.abs(exact.astype(np.float32))).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / spacing
