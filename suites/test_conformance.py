"""One test per check; each runs on every (candidate, case, dtype, device) of the run, its shape-
axis and path groups, and every sharded group (candidate, case, dtype, device, world size,
placement) of a run with --world-sizes (replicas, shards, sharding run only there; contract,
generator and threads on the grid's unsharded groups; inplace on the shape axis).

The statistics live in `harness/`; these tests only name the check. Run with
`pytest suites --candidate SPEC` (see README.md for the options).
"""

import pytest

check = pytest.mark.harness_check


@check("finite")
def test_finite(verify, conformance_case):
    """No NaN or infinity, ever."""
    verify("finite", conformance_case)


@check("written")
def test_written(verify, conformance_case):
    """Every element of the tensor is written on every call (the tensor is poisoned before)."""
    verify("written", conformance_case)


@check("bounds")
def test_bounds(verify, conformance_case):
    """Every value lies in [RN(a), RN(b)] (or [a, b] with --bounds strict)."""
    verify("bounds", conformance_case)


@check("hang")
def test_hang(verify, conformance_case):
    """Every call returns within --case-timeout seconds."""
    verify("hang", conformance_case)


@check("inplace")
def test_inplace(verify, conformance_case):
    """The shape axis: the tensor given is written in place, and nothing outside a view."""
    verify("inplace", conformance_case)


@check("contract")
def test_contract(verify, conformance_case):
    """In place, same tensor back, views written exactly, edge shapes, nn.Parameter, meta."""
    verify("contract", conformance_case)


@check("generator")
def test_generator(verify, conformance_case):
    """Same seed, same bits; other seed, other bits; an explicit generator leaves the global RNG alone."""
    verify("generator", conformance_case)


@check("threads")
def test_threads(verify, conformance_case):
    """The same generator state with 1 and with all torch threads (recorded; held if declared)."""
    verify("threads", conformance_case)


@check("gof")
def test_gof(verify, conformance_case):
    """Chi-square / G over exact histogram bins of the rounded law."""
    verify("gof", conformance_case)


@check("ks")
def test_ks(verify, conformance_case):
    """Kolmogorov-Smirnov against the rounded law's CDF at the bin edges."""
    verify("ks", conformance_case)


@check("atoms")
def test_atoms(verify, conformance_case):
    """Mass of the boundary atoms RN(a) and RN(b)."""
    verify("atoms", conformance_case)


@check("tails")
def test_tails(verify, conformance_case):
    """Counts beyond the law's 1e-3, 1e-5 and 1e-7 quantiles on each side."""
    verify("tails", conformance_case)


@check("moments")
def test_moments(verify, conformance_case):
    """Mean, std, skewness and kurtosis of the rounded law."""
    verify("moments", conformance_case)


@check("extremes")
def test_extremes(verify, conformance_case):
    """Row minima and maxima against the exact order-statistic law."""
    verify("extremes", conformance_case)


@check("independence")
def test_independence(verify, conformance_case):
    """Lag-1 correlation along every dim and across calls; duplicate rows."""
    verify("independence", conformance_case)


@check("spikes")
def test_spikes(verify, conformance_case):
    """No single value over-represented: the finest exact bins, then (stage 2) the values themselves."""
    verify("spikes", conformance_case)


@check("scan")
def test_scan(verify, conformance_case):
    """No bump or hole at any scale: every interval of a multiscale family, exact binomial tests."""
    verify("scan", conformance_case)


@check("position")
def test_position(verify, conformance_case):
    """The law of elements by position: first, last, vector-loop remainders, row ends."""
    verify("position", conformance_case)


@check("repetition")
def test_repetition(verify, conformance_case):
    """No stretch of the output appears twice, in the same tensor or the next call."""
    verify("repetition", conformance_case)


@check("collisions")
def test_collisions(verify, conformance_case):
    """Equal values no more (or less) often than the law allows: the bits of randomness."""
    verify("collisions", conformance_case)


@check("lattices")
def test_lattices(verify, conformance_case):
    """No more values on a coarser format's lattice than the law puts there."""
    verify("lattices", conformance_case)


@check("replicas")
def test_replicas(verify, conformance_case):
    """Sharded groups, Replicate: every rank holds rank 0's bits on every call."""
    verify("replicas", conformance_case)


@check("shards")
def test_shards(verify, conformance_case):
    """Sharded groups, Shard(d): no shard repeats another (equal elements, correlation, rows)."""
    verify("shards", conformance_case)


@check("sharding")
def test_sharding(verify, conformance_case):
    """Sharded groups: the whole tensor against the unsharded one (held for invariant candidates)."""
    verify("sharding", conformance_case)


@check("arguments")
def test_arguments(verify, api_case):
    """Invalid arguments raise; a == b raises or fills with a (recorded)."""
    verify("arguments", api_case)
