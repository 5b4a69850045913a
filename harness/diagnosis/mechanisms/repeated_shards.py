"""The `repeated-shards` mechanism: the shards of a sharded tensor that are copies of one another
(every rank fills its local shard from the same stream: one seed on every rank, torch on a CPU
mesh), read from the layout facts a sharded draw leaves on its Summary (`harness.checks.sharded`).

Its prediction is the law's: shards of independent draws hold bit-identical elements at one local
index at the collision rate; the match is the `shards` check departing at FALSE_MATCH with its
equal-elements or equal-shards component (a correlation alone is another dependence: mirrored
shards). Where the copies are whole (shards equal in every element of every call), it also
predicts what they do to every count: each value is counted c times, c the shards over the
distinct draws among them, which inflates the histogram's chi-square c-fold; where the chi-square
agrees, the value checks' failures and the rows that repeat across a shard boundary
(`independence`) are the copies'.
"""

from __future__ import annotations

import math

from ...checks.sharded import SHARDS
from ...families.independence import INDEPENDENCE
from ..evidence import FALSE_MATCH, Evidence
from ..match import Match, Mechanism
from .value_law import BINNED

#: The `shards` components that say a shard repeats another's values.
COPY_COMPONENTS = ("equal elements", "equal shards")


def copies(sharding) -> float | None:
    """How many times each value of the whole tensor is written where some shards are whole
    copies of others (every element of every call equal at the same local index): the shards'
    elements over those of the distinct draws among them. None where no shard is a whole copy."""
    sizes = [math.prod(shape) for _, shape in sharding.boxes]
    owner = list(range(len(sizes)))

    def root(k: int) -> int:
        while owner[k] != k:
            k = owner[k]
        return k

    for pair in sharding.pairs:
        whole = pair.elements > 0 and pair.equal == pair.elements
        if whole and sizes[pair.i] == sizes[pair.j]:
            owner[root(pair.j)] = root(pair.i)
    distinct = sum(sizes[k] for k in range(len(sizes)) if root(k) == k)
    total = sum(sizes)
    return total / distinct if 0 < distinct < total else None


class RepeatedShards(Mechanism):
    name = "repeated-shards"
    explains = frozenset({SHARDS.name})
    doc = ("Shards that copy one another: every rank draws its shard from the same stream. "
           "Prediction: the law's (independent shards, equal elements at the collision rate); a "
           "match is the shards check departing on its equal elements or equal shards at "
           "FALSE_MATCH; whole copies count each value c times, the histogram's chi-square at c "
           "times its df.")

    def test(self, ev: Evidence) -> Match | None:
        sharding = getattr(ev.summary, "sharding", None)
        if sharding is None or not sharding.pairs:
            return None
        out = ev.outcome(SHARDS)
        if not out.applicable or not out.p_value < FALSE_MATCH:
            return None
        if not any(key.startswith("p[") and any(c in key for c in COPY_COMPONENTS)
                   and p < FALSE_MATCH for key, p in out.details.items()):
            return None
        note = f"shards p {out.p_value:.2g}: {out.message}"[:400]
        count = copies(sharding)
        inflation = ev.copies_inflate(count) if count is not None else None
        if inflation is not None:
            return self.match(f"{note}; {inflation}", parameter=count,
                              explains=self.explains | BINNED | {INDEPENDENCE.name})
        return self.match(note, parameter=count)
