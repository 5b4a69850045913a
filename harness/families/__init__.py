"""The statistic families: each module is one family, from the law's side to its verdict.

A family module holds, side by side:

* its *state* (a dataclass filed in the Summary under the family's name, read as
  ``summary.<family>``) with ``merge(parts, whole)``, the rule by which the states of a sharded
  parameter's parts make the whole's: a `harness.engine.FamilyState`;
* its *accumulator*: ``init(law, shape, fold)`` (None where there is nothing to fold for this
  law, dtype or part), ``fold(chunk)`` on the chunk's device, ``finish(whole) -> state``: a
  `harness.engine.Accumulator`;
* the law's side it needs, as calls to `reference.rounded.RoundedLaw`'s public methods;
* its check declaration(s) (`harness.declaration.statistical`): the pure function
  ``(Summary, RoundedLaw, *, alpha) -> Outcome``, its doc and method, the unit of its effect and
  its MDE, a named function ``(law, n, shape, alpha)`` (one signature for every check:
  `harness.declaration.MinimumDetectableEffect`);
* `FAMILY`, the `harness.engine.Family` that names it to the fold, with the families it reads.

The families: `binned` (gof, ks), `tails`, `atoms`, `support` (what the hard checks finite,
written and bounds read), `moments`, `extremes`, `independence`, `localized` (spikes, scan),
`position`, `repetition`, `resolution` (collisions, lattices). A new statistic is one new module
here and one entry in `harness.checks.registry.CHECKS`: the fold loops over the families of the
checks that apply, `Summary.merge` over the states it holds.

``alpha`` is only used to state the minimum detectable effect (MDE); the verdict is taken by
`harness.runner.CaseRunner` from the p-value. Every p-value is valid (exact or conservative) for
the rounded law, in [0, 1], and never NaN when ``Outcome.applicable``. Zero-probability events
under the law (counts in bins the law gives no mass, a row extreme outside the support, an atom of
mass 0 hit) set ``decisive=True`` with p = 0.

MDE convention (all checks): the effect that the whole check, Bonferroni factor included, detects
with probability 0.5 at level alpha, i.e. the effect that puts the statistic's median on the
critical value. Power 0.9 needs roughly 1.6x (z-tests) to 2x (counts) the effect, or ~(1.6)^2 the n.

May import: `harness.engine`, `harness.declaration` and the floors below them (summary, bins,
group, cases, seeds, result), `reference`.
"""
