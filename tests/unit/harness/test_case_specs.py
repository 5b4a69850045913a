"""Cases as data: --case specs, cases recorded from a model, the explored design, the union bound
that holds an exploration at its family-wise rate, shrinking to a boundary, and the memory gate of
a shape too big for its device. Pure functions: no draw here (tests/e2e runs them through pytest)."""

from __future__ import annotations

import math
import sys

import pytest

from harness.cases import CaseSpecError, case_spec, parse_case_spec
from harness.error_control import alpha_decide, per_check_rate
from harness.explore import (EXPLORE_FWER, INFINITE_SHARE, bounds, explore_alpha_fail,
                             explored_cases)
from harness.session.devices import BYTES_PER_ELEMENT, memory_skip_reason
from harness.model_calls import RecordingError, cases_from
from harness.runner.shrink import STEPS, shrink


def test_a_spec_is_a_case_with_its_own_stable_id():
    case = parse_case_spec("mean=0,std=0.02,a=-0.04,b=0.04,shape=151936x4096")
    assert (case.mean, case.std, case.a, case.b) == (0.0, 0.02, -0.04, 0.04)
    assert case.shape == (151936, 4096) and case.own_shape
    assert case.alpha == pytest.approx(-2.0) and case.beta == pytest.approx(2.0)
    # the same spec, spelled otherwise, is the same case (same id, so the same seeds)
    again = parse_case_spec(" std=2e-2 , a=-4e-2, b=0.040, shape=151936x4096 ")
    assert again.id == case.id and again.id.startswith("case-")
    assert parse_case_spec(case.spec).spec == case.spec  # its spec round-trips
    other = parse_case_spec("mean=0,std=0.02,a=-0.04,b=0.05,shape=151936x4096")
    assert other.id != case.id


def test_a_spec_without_shape_takes_the_grid_shape_and_infinite_bounds():
    case = parse_case_spec("std=1,a=-inf,b=inf,id=normal")
    assert case.id == "normal" and case.shape == (256, 256) and not case.own_shape
    assert math.isinf(case.a) and math.isinf(case.b)
    assert case_spec(0.0, 1.0, -math.inf, math.inf) == "mean=0.0,std=1.0,a=-inf,b=inf"


@pytest.mark.parametrize("spec, says", [
    ("mean=0,std=0,a=-1,b=1", "std must be finite and > 0"),
    ("mean=0,std=-1,a=-1,b=1", "std must be finite and > 0"),
    ("mean=0,std=inf,a=-1,b=1", "std must be finite and > 0"),
    ("mean=0,std=1,a=2,b=1", "a > b"),
    ("mean=0,std=1,a=nan,b=1", "a is NaN"),
    ("mean=inf,std=1,a=-1,b=1", "mean must be finite"),
    ("mean=0,std=1,a=inf,b=inf", "is a point, not a window"),
    ("mean=0,std=1,a=0.5,b=0.5", "is a point, not a window"),
    ("mean=0,std=1,a=-1", "b= is missing"),
    ("std=1,a=-1,b=1,sigma=2", "unknown key 'sigma'"),
    ("std=1,a=-1,b=1,std=2", "std given twice"),
    ("std=1,a=-1,b=1,shape=3x0", "has a dimension < 1"),
    ("std=1,a=-1,b=1,shape=3by4", "is not like 151936x4096"),
    ("std=one,a=-1,b=1", "is not a number"),
    ("std=1 a=-1 b=1", "is not key=value"),
    ("std=1,a=-1,b=1,id=has space", "may hold letters"),
    ("std=1,a=-2,b=2,id=normal-2sigma", "is a grid case's"),
])
def test_a_bad_spec_is_one_line_naming_it(spec, says):
    with pytest.raises(CaseSpecError) as info:
        parse_case_spec(spec)
    text = str(info.value)
    assert says in text and "\n" not in text and repr(spec) in text


def test_a_model_records_its_trunc_normal_calls_as_cases(repo_root):
    cases = cases_from(str(repo_root / "examples/models/vit.py") + ":build")
    shapes = {c.shape for c in cases}
    assert (1, 197, 384) in shapes and (1, 1, 384) in shapes and (1152, 384) in shapes
    assert all(c.dtypes == ("bfloat16",) and c.own_shape for c in cases)
    # timm's default: std 0.02 with torch's absolute bounds, i.e. +-100 sigma
    assert {(c.std, c.a, c.b) for c in cases} == {(0.02, -2.0, 2.0)}
    assert [c.id for c in cases] == [f"vit-{i}" for i in range(len(cases))]
    assert len({c.shape for c in cases}) == len(cases)  # one case per distinct call


def test_a_model_that_cannot_be_recorded_is_one_line(tmp_path):
    profiler = sys.getprofile()
    model = tmp_path / "broken.py"
    model.write_text("import torch\n"
                     "def build():\n    raise ValueError('no weights\\nsecond line')\n"
                     "def quiet():\n    return torch.nn.Linear(2, 2)\n")
    for spec, says in [(f"{model}:build", "raised ValueError: no weights"),
                       (f"{model}:quiet", "made no truncated-normal call"),
                       (f"{model}:absent", "absent"),
                       ("no_such_module_xyz:build", "no_such_module_xyz")]:
        with pytest.raises(RecordingError) as info:
            cases_from(spec)
        assert says in str(info.value) and "\n" not in str(info.value)
    # A model that raised leaves no recording behind: the profile function is the one before.
    assert sys.getprofile() is profiler


def test_the_design_is_reproducible_and_covers_the_space():
    cases = explored_cases(512, seed=7)
    assert [c.spec for c in cases] == [c.spec for c in explored_cases(512, seed=7)]
    assert [c.spec for c in cases] != [c.spec for c in explored_cases(512, seed=8)]
    assert [c.id for c in cases[:2]] == ["explore-7-0000", "explore-7-0001"]
    alphas = [c.alpha for c in cases]
    betas = [c.beta for c in cases]
    lower_infinite = sum(math.isinf(a) for a in alphas) / len(cases)
    assert abs(lower_infinite - INFINITE_SHARE) < 0.03  # Sobol: far closer than random
    assert any(b < 0 for b in betas) and any(a > 0 for a in alphas)  # windows on both sides
    widths = [b - a for a, b in zip(alphas, betas) if math.isfinite(a) and math.isfinite(b)]
    assert min(widths) < 1e-5 and max(widths) > 20
    stds = [c.std for c in cases]
    assert min(stds) < 1e-7 and max(stds) > 1e3
    assert all(c.a < c.b for c in cases)


def test_bounds_are_mean_plus_standardized_bounds():
    assert bounds(1.0, 2.0, -1.0, 3.0) == (-1.0, 7.0)
    assert bounds(1.0, 2.0, -math.inf, math.inf) == (-math.inf, math.inf)
    # explore-1-0088: a window 1e-6 std wide at a mean 1.3e11 std from 0 rounds to one float64;
    # it becomes the narrowest window there is, not a point the law cannot be built for
    mean, std = 2473.842741236931, 1.844509790200794e-08
    a, b = bounds(mean, std, 18.14, 18.14 + 1e-6)
    assert b == math.nextafter(a, math.inf)
    assert any(c.b == math.nextafter(c.a, math.inf) for c in explored_cases(256, seed=1))


def test_the_union_bound_holds_the_exploration_at_its_rate():
    groups, checks, alpha_suspect = 64 * 4, 12, 1e-3
    level = explore_alpha_fail(groups, checks, alpha_suspect, default=1e-6)
    # each two-stage check fails a correct sampler with probability <= per_check_rate: its
    # stage-1 p below alpha_decide, or both stages below their levels
    assert groups * checks * per_check_rate(alpha_suspect, level) == pytest.approx(EXPLORE_FWER)
    assert alpha_decide(alpha_suspect, level) + alpha_suspect * level == pytest.approx(
        EXPLORE_FWER / (groups * checks))
    assert explore_alpha_fail(1, 1, 1e-3, default=1e-6) == 1e-6  # never looser than asked


def test_shrinking_finds_the_boundary_of_a_failing_region():
    # A sampler that fails wherever the window lies wholly below -3 sigma (beta < -3).
    origin = next(c for c in explored_cases(256, seed=3)
                  if math.isfinite(c.alpha) and c.beta < -6 and c.beta - c.alpha < 1)
    probes = []

    def failing(case):
        probes.append(case.id)
        return case.beta < -3.0

    found = {b.parameter: b for b in shrink(origin, "float32", failing)}
    assert "beta" in found
    beta = found["beta"]
    assert beta.direction == "<=" and abs(beta.boundary - -3.0) < 0.1
    assert beta.failing < -3.0 < beta.passing
    assert parse_case_spec(beta.repro).beta < -3.0  # the reproduce spec is on the failing side
    assert len(probes) <= 4 * (STEPS + 1)
    assert len(set(probes)) == len(probes)  # every probe its own case (own seeds)


def test_a_shape_too_big_for_the_device_is_a_skip_reason():
    gib = 1 << 30
    assert memory_skip_reason((256, 256), "cpu", available=gib) is None
    reason = memory_skip_reason((151936, 4096), "cpu", available=8 * gib)
    needed = 151936 * 4096 * BYTES_PER_ELEMENT / gib
    assert reason.startswith("shape 151936x4096 (622329856 elements) needs about")
    assert f"{needed:.1f} GiB" in reason and "8.0 GiB free" in reason
    # a scalar is one element
    assert memory_skip_reason((), "cpu", available=BYTES_PER_ELEMENT) is None
    assert memory_skip_reason((), "cpu", available=BYTES_PER_ELEMENT - 1) is not None
