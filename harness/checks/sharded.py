"""The checks only a sharded parameter can fail: `replicas`, `shards`, `sharding`.

Each is a pure function ``(Summary, RoundedLaw, *, alpha) -> Outcome`` like the statistical checks,
reading the layout facts a sharded draw leaves on the merged Summary (``summary.sharding``, a
`harness.sharded.part_fold.ShardingStats`); `harness.runner.CaseRunner` applies the same two-stage rule to
them (a decisive Outcome fails at once). On a Summary without those facts they are not applicable.

* ``replicas`` (hard): with a Replicate placement every rank must hold the same bits as rank 0, on
  every call. Under the law a difference has probability 0 (there is one tensor), so any differing
  element is decisive. False-alarm rate 0.
* ``shards`` (statistical): no shard repeats another. For every pair of non-empty shards (i < j),
  call by call, four components: bit-identical elements at the same local index (Bin(N, q), q the
  collision probability of one value: the output's own marginal where the Summary counts every
  value apart, as `independence` takes it, else the law's; exact two-sided binomial where q is
  exact, one-sided above otherwise), the correlation of z at the same local index (sqrt(N) r ~
  N(0, 1)), rows of shard i equal to some row of shard j (Poisson with mean pairs x q^m while that
  is small) and whole shards equal (Poisson, calls x q^(box size)). Bonferroni over pairs and
  components. Identical shards (torch 2.13 on a CPU mesh) fail every component at p ~ 0; each
  component alone is proved by a saboteur in tests/unit/harness/test_sharded_checks.py. False-alarm rate <=
  alpha per stage (asymptotic for the correlation), <= 1e-6 with two stages.
* ``sharding`` (hard for a declared claim): the first calls of the sharded tensor against the
  unsharded (W = 1) tensor from the same seed, element by element. The differences are recorded
  for every candidate (statistic: the fraction of elements that differ); a candidate that declares
  itself sharding-invariant (``@candidate(sharding_invariant=True)``) fails on any differing bit.
  The reference is the run's seed on one process, so under per-rank seeds the claim means "the
  whole tensor is rank 0's stream". False-alarm rate 0 (no randomness in the verdict).
"""

from __future__ import annotations

import math

from ..declaration import SHARDED, statistical
from ..families import atoms, binned, resolution
from ..families.common import bonferroni, norm_two_sided, not_applicable, quiet
from ..families.independence import (DUP_POISSON_MAX_PER_CALL, component_mde, equal_count_p,
                                     marginal_rate, poisson_count_component)
from ..result import Outcome
from ..summary import Summary

def _stats(summary: Summary):
    return getattr(summary, "sharding", None)


@quiet
def check_replicas(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    unit = "elements differing from rank 0"
    st = _stats(summary)
    if st is None:
        return not_applicable("not a sharded draw", unit)
    if st.layout.placement != "replicate" or st.layout.world_size < 2:
        return not_applicable(f"placement {st.layout.placement}: the ranks hold different parts, "
                              f"no replicas (see shards)", unit)
    if st.replica_calls == 0:
        return not_applicable("no calls compared", unit)
    ranks = st.layout.world_size
    calls = st.replica_calls // (ranks - 1)
    if st.replica_differing:
        frac = st.replica_differing / st.replica_elements
        return Outcome(statistic=float(st.replica_differing), p_value=0.0, effect=frac,
                       effect_unit="fraction of elements differing from rank 0", mde=0.0,
                       decisive=True,
                       message=(f"replicas differ: {st.replica_first}; over {calls} calls "
                                f"{st.replica_calls_differing} rank-calls differ, "
                                f"{st.replica_differing} of {st.replica_elements} elements "
                                f"({100 * frac:.3g}%)"),
                       details={"replica_calls_differing": st.replica_calls_differing,
                                "replica_differing": st.replica_differing})
    return Outcome(statistic=0.0, p_value=1.0, effect=0.0,
                   effect_unit="fraction of elements differing from rank 0", mde=0.0,
                   message=f"all {ranks} ranks held bit-identical replicas in {calls} calls")


def _components(summary: Summary, law, st):
    """[(name, p, effect, unit, mde_spec, text)] over every pair and component."""
    comps = []
    rate = marginal_rate(summary, law)
    q, q_rows = rate.q, rate.upper()
    # counts whose mean is a power of q are priced at its upper confidence bound
    degenerate = not (float(law.std) > 0)
    for pair in st.pairs:
        tag = f"shards {pair.i} and {pair.j}"
        n_el = int(pair.elements)
        if n_el and 0 <= q < 1:
            k = int(pair.equal)
            exp = n_el * q
            p = equal_count_p(k, n_el, rate)
            comps.append((f"{tag}: equal elements", p, k / exp if exp > 0 else (math.inf if k else 1.0),
                          "obs/exp", ("binom", n_el, q),
                          f"{tag}: {k} of {n_el} elements bit-identical at the same local index vs "
                          f"{exp:.4g} expected (q from {rate.source})"))
        r = pair.corr.correlation() if pair.corr.count >= 3 and not degenerate else math.nan
        if math.isfinite(r):
            z = math.sqrt(pair.corr.count) * r
            comps.append((f"{tag}: correlation", float(norm_two_sided(z)), r, "correlation r",
                          pair.corr.count,
                          f"{tag}: r {r:+.4g} at the same local index over {pair.corr.count} "
                          f"pairs (z {z:+.2f})"))
        if pair.row_len >= 1 and pair.row_pairs and 0 < q_rows < 1:
            per_call = pair.row_pairs / max(1, pair.calls) * q_rows ** pair.row_len
            if per_call <= DUP_POISSON_MAX_PER_CALL:
                lam = pair.calls * per_call
                k = int(pair.dup_rows)
                comps.append(poisson_count_component(
                    f"{tag}: repeated rows", k, lam,
                    f"{tag}: {k} of {pair.rows} rows of shard {pair.i} repeat a row of "
                    f"shard {pair.j} in the same call vs {lam:.3g} expected"))
        if pair.box_numel and pair.calls and 0 < q_rows < 1:
            per_call = q_rows ** pair.box_numel
            if per_call <= DUP_POISSON_MAX_PER_CALL:
                lam = pair.calls * per_call
                k = int(pair.calls_equal)
                comps.append(poisson_count_component(
                    f"{tag}: equal shards", k, lam,
                    f"{tag}: bit-identical in {k} of {pair.calls} calls vs {lam:.3g} expected"))
    return comps


@quiet
def check_shards(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    unit = "obs/exp"
    st = _stats(summary)
    if st is None:
        return not_applicable("not a sharded draw", unit)
    if st.layout.placement == "replicate":
        return not_applicable("Replicate: every rank holds the whole tensor (see replicas)", unit)
    if not st.pairs:
        return not_applicable(f"fewer than two ranks hold elements of a tensor of shape "
                              f"{'x'.join(map(str, st.shape))} ({st.layout.label})", unit)
    comps = _components(summary, law, st)
    if not comps:
        return not_applicable("the output is one value throughout: shards must repeat", unit)
    p, j = bonferroni([c[1] for c in comps])
    name, pj, eff, eff_unit, spec, text = comps[j]
    level = alpha / len(comps)
    others = "; ".join(c[5] for i, c in enumerate(comps) if i != j and c[1] < 1e-3)
    msg = f"worst: {text}" + (f"; also {others}" if others else "") + \
        f" ({len(st.pairs)} shard pairs, {len(comps)} components)"
    details = {f"p[{c[0]}]": c[1] for c in comps}
    details["calls_equal"] = sum(pp.calls_equal for pp in st.pairs)
    details["pairs"] = len(st.pairs)
    return Outcome(statistic=float(eff), p_value=p, effect=float(eff), effect_unit=eff_unit,
                   mde=component_mde(spec, level), message=msg, details=details)


@quiet
def check_sharding(summary: Summary, law, *, alpha: float = 1e-3) -> Outcome:
    unit = "fraction of elements differing from W=1"
    st = _stats(summary)
    if st is None:
        return not_applicable("not a sharded draw", unit)
    if st.reference_error:
        return not_applicable(f"no unsharded reference: {st.reference_error}", unit)
    if st.reference_calls == 0 or st.reference_elements == 0:
        return not_applicable("no calls compared with the unsharded tensor", unit)
    calls = st.reference_calls
    frac = st.reference_differing / st.reference_elements
    same = st.reference_calls_identical
    where = (f"{st.layout.label} vs the unsharded tensor from the same seed, first {calls} calls: ")
    details = {"reference_calls": calls, "reference_calls_identical": same,
               "reference_differing": st.reference_differing,
               "reference_elements": st.reference_elements,
               "declared_invariant": bool(st.declared_invariant)}
    if st.reference_differing == 0:
        claim = "as declared" if st.declared_invariant else "not declared, holds here"
        return Outcome(statistic=0.0, p_value=1.0, effect=0.0, effect_unit=unit, mde=0.0,
                       message=where + f"bit-identical in every call ({claim})", details=details)
    text = (where + f"{st.reference_differing} of {st.reference_elements} elements differ "
            f"({100 * frac:.3g}%), {same} of {calls} calls identical")
    if st.declared_invariant:
        return Outcome(statistic=frac, p_value=0.0, effect=frac, effect_unit=unit, mde=0.0,
                       decisive=True, details=details,
                       message=text + "; the candidate declares itself sharding-invariant")
    return Outcome(statistic=frac, p_value=1.0, effect=frac, effect_unit=unit, mde=0.0,
                   details=details,
                   message=text + " (recorded: the candidate does not declare itself "
                                  "sharding-invariant)")


REPLICAS = statistical(
    "replicas", check_replicas, kind="hard", scope=SHARDED, unit="elements differing from rank 0",
    mde=None,
    doc="Sharded groups, Replicate: every rank holds rank 0's bits on every call.",
    method=("With Replicate, every rank holds rank 0's bits on every call; any difference is "
            "impossible under the law (decisive). False-alarm rate 0."),
)
SHARDS = statistical(
    "shards", check_shards, scope=SHARDED, unit="obs/exp", mde=None,
    families=(binned.FAMILY, atoms.FAMILY, resolution.FAMILY),
    doc="Sharded groups, Shard(d): no shard repeats another (equal elements, correlation, rows).",
    method=("No shard repeats another: equal elements and correlation at the same local index, "
            "rows repeated across shards, whole shards equal; expected rates from the collision "
            "probability of the output's own marginal (as independence takes it: above 16 bits "
            "from the resolution scan's equal pairs); Bonferroni over "
            "shard pairs and components. False-alarm rate <= alpha per stage, <= 1e-6 two-stage."),
)
SHARDING = statistical(
    "sharding", check_sharding, kind="hard", scope=SHARDED,
    unit="fraction of elements differing from W=1", mde=None,
    doc="Sharded groups: the whole tensor against the unsharded one (held for invariant "
        "candidates).",
    method=("The sharded tensor against the unsharded one from the same seed (first calls): "
            "differences recorded; a candidate declaring sharding invariance fails on any "
            "differing bit. False-alarm rate 0."),
)

DECLARED = (REPLICAS, SHARDS, SHARDING)
