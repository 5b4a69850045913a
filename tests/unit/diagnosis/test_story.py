"""One group, one story, and whose kernel (`harness.diagnosis.mechanism_catalog.story`).

A library's own kernel (`library-construction`, `coarse-construction`) names a row only for the
candidates that run it, and otherwise comes after the generic mechanism as "reads like"; the
rows of one group share the match that explains them, and a note says which checks the story's
other mechanisms explain.

Failure chances. The samples of the three coarse constructions are drawn from a fixed numpy
seed (deterministic); over seeds, each asserted departure is far beyond noise at 2^21 (gof,
spikes, scan, collisions, lattices, low_bits at p = 0 or below 1e-27), and a true law fails
each of its fits (the histogram, the mass bins, the equal pairs, the lattices, the last bits)
with probability <= AGREE_LEVEL = 1e-6: <= 5e-6 a construction (deterministic here). Their
draws are iid, independence's null: its p-value is super-uniform (0 of 500 seeds below 1e-3 on
these marginals, docs/method/calibration.md), so p >= 1e-7 fails with probability <= 1e-7.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import special

from candidates.catalog import registered_names
from harness.checks import CHECKS, summarize_samples
from harness.diagnosis.match import Match
from harness.diagnosis.mechanism_catalog import diagnose, explain, story
from harness.diagnosis.mechanisms import coarse_construction, library_laws
from harness.diagnosis.scope import TORCH_INVERSE_CDF, candidate_name, torch_release
from reference import TruncatedNormal, rounded_law

pytestmark = pytest.mark.usefixtures("one_thread")

OUTCOMES = CHECKS.outcomes()

GENERIC = Match("dtype-arithmetic", frozenset({"lattices", "low_bits", "gof"}), "on float16")
PADDLE = Match("coarse-construction", frozenset({"gof", "scan", "spikes"}), "Paddle's steps",
               kernel="Paddle's truncated_gaussian_random kernel",
               kernel_of=frozenset({"paddle"}))
DEPENDENT = Match("dependence", frozenset({"independence", "repetition"}), "copies")


def test_a_library_kernel_is_named_only_for_the_candidates_that_run_it():
    matches = (GENERIC, DEPENDENT, PADDLE)
    mechanism, note = explain("scan", "fail", "", matches, "paddle")
    assert mechanism == "coarse-construction" and note.startswith("Paddle's steps"), note
    # even for its own candidates, a kernel never outranks a generic mechanism of the row,
    # whatever the catalog's order, unless it explains every check that one does, and more
    assert explain("gof", "fail", "", (PADDLE, GENERIC), "paddle")[0] == "dtype-arithmetic"
    wider = Match("coarse-construction", GENERIC.explains | PADDLE.explains, "Paddle's law",
                  kernel=PADDLE.kernel, kernel_of=PADDLE.kernel_of)
    assert explain("gof", "fail", "", (GENERIC, wider), "paddle")[0] == "coarse-construction"
    assert explain("gof", "fail", "", (GENERIC, wider), "mine.py:fn")[0] == "dtype-arithmetic"
    for candidate in ("my_sampler.py:fn", "torch", "jax", None):
        mechanism, note = explain("scan", "fail", "", matches, candidate)
        assert mechanism == "unexplained", candidate
        # what the group's named mechanisms explain, then what the row reads like
        assert note.startswith("the group's other rows, where they fail: dtype-arithmetic"), note
        assert note.endswith("(coarse-construction: Paddle's steps)"), note
        assert "reads like Paddle's truncated_gaussian_random kernel" in note, note
        # a generic mechanism that explains the row keeps it; the kernel follows it
        mechanism, note = explain("gof", "fail", "", matches, candidate)
        assert mechanism == "dtype-arithmetic" and note.startswith("on float16"), note
        assert note.index("reads like") > note.index("on float16")


def test_the_notes_say_which_rows_the_other_mechanisms_explain():
    group = story((GENERIC, DEPENDENT), "mine.py:fn")
    name, note = group.row("lattices")
    assert name == "dtype-arithmetic"
    assert note.endswith("dependence explains independence, repetition"), note
    name, note = group.row("independence")
    assert name == "dependence" and "dtype-arithmetic explains gof, lattices, low_bits" in note
    assert story((GENERIC,)).row("gof") == ("dtype-arithmetic", "on float16")


def test_every_kernel_names_registered_candidates():
    """Each library construction says whose kernel it is and lists candidates that exist."""
    known = set(registered_names())
    kernels = list(library_laws.CONSTRUCTIONS) + list(coarse_construction.CONSTRUCTIONS)
    for construction in kernels:
        assert construction.kernel and construction.users, construction
        assert construction.users <= known, construction.users - known
    assert {"torch-legacy", "fp32-upcast"} <= TORCH_INVERSE_CDF
    assert ("torch" in TORCH_INVERSE_CDF) == (torch_release() < (2, 12))
    assert torch_release("2.11.0+cu128") == (2, 11) and torch_release("2.13.0a0") == (2, 13)
    assert candidate_name(None) == "" and candidate_name("paddle") == "paddle"


def on_float16(u: np.ndarray, dtype) -> torch.Tensor:
    """The exact law's quantiles at u in float64, rounded into float16, written into `dtype`."""
    x = special.ndtri(special.ndtr(-2.0) + u * (special.ndtr(2.0) - special.ndtr(-2.0)))
    return torch.from_numpy(x).to(torch.float16).to(dtype)


def twelve_bits(u: np.ndarray, dtype) -> torch.Tensor:
    """The exact law's quantiles at the midpoint of u's cell of 2^-12, in float64, into `dtype`."""
    mid = (np.floor(u * 4096.0) + 0.5) / 4096.0
    x = special.ndtri(special.ndtr(-2.0) + mid * (special.ndtr(2.0) - special.ndtr(-2.0)))
    return torch.from_numpy(x).to(dtype)


@pytest.mark.parametrize("construction,dtype,mechanism,says", [
    (on_float16, torch.float32, "dtype-arithmetic", "the law rounded into float16"),
    # the scan counts only float32's lattice in a float64 tensor: the pairs say float16's
    (on_float16, torch.float64, "dtype-arithmetic", "on the float16 lattice"),
    (twelve_bits, torch.float32, "few-random-bits", "k = 12 random bits"),
])
def test_a_coarse_construction_no_library_wrote_tells_one_story(construction, dtype, mechanism,
                                                                says):
    """Samplers no library wrote, at 2^21 on +-2 sigma: the exact law drawn in float64 and
    rounded into float16 (written into float32 or float64), and the exact law's quantile at the
    midpoints of a 12-bit uniform. Every row that fails reads one generic mechanism, from its
    law value by value (the histogram, the mass bins, the equal pairs, the lattices, the last
    bits), none a library's kernel; independence, which takes its repeats from the output's own
    marginal, passes."""
    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), dtype)
    u = np.random.default_rng(3).random(1 << 21)
    summary = summarize_samples(construction(u, dtype).reshape(-1, 256, 256), law)
    matches = diagnose(summary, law)
    failing = {name for name, check in OUTCOMES.items()
               if (out := check(summary, law)).applicable and out.p_value < 1e-3}
    assert {"gof", "spikes", "scan", "collisions", "lattices", "low_bits"} <= failing
    # iid draws of a coarse marginal: independence's null (p 0 against the law's own rate)
    assert OUTCOMES["independence"](summary, law).p_value >= 1e-7
    for check in failing - {"independence"}:
        name, note = explain(check, "fail", "", matches, "mine.py:fn")
        assert name == mechanism, (check, [(m.name, m.note[:200]) for m in matches])
        assert "reads like" not in note and says in note, note
