"""One scale standardizes values wherever the harness standardizes them: the Summary's z, the
moments' asymptotic sds, and the sharded fold's cross-shard comparisons all take
`harness.engine.fold.standard_scale`."""

from __future__ import annotations

import math

import numpy as np
import torch

from harness.engine import new_summary, standard_scale
from harness.families.moments import moment_sds
from reference import TruncatedNormal, rounded_law


def _law(std):
    return rounded_law(TruncatedNormal(1.0, std, -math.inf, math.inf), torch.bfloat16)


def test_a_rounded_std_below_the_floor_gives_way_to_the_continuous_one():
    # bf16 spacing at 1 is 2^-7: with std 2.5e-4 all but ~1e-55 of the mass rounds to 1.0, and
    # the rounded std (~2e-10) is below 1e-6 of the continuous one.
    law = _law(2.5e-4)
    assert 0 < float(law.std) < 1e-6 * float(law.dist.std)
    assert standard_scale(law) == float(law.dist.std)
    assert standard_scale(_law(1e-3)) == float(_law(1e-3).std)  # a law that is not one atom


def test_the_moments_standardize_as_the_summary_does():
    law = _law(2.5e-4)
    summary = new_summary(law, (4, 8), torch.bfloat16)
    assert summary.scale == standard_scale(law)
    by_default, _ = moment_sds(law)
    as_summarized, _ = moment_sds(law, summary.scale, summary.center)
    np.testing.assert_array_equal(by_default, as_summarized)
