"""The Summary: everything the checks may know about a candidate's output, in memory that does not grow with n.

The engine (`harness.engine`) folds every chunk of samples, on the chunk's device, into one Summary;
the checks read only the Summary and the reference law. A Summary is a small common core (what the
case and the draw are: dtype, shape, the law's centre, scale and bounds, the elements and calls
drawn, the timings) plus one *state* per statistic family folded (`harness.families`), filed
under the family's name: ``summary.binned.hist``, ``summary.moments.power_sums``,
``summary.states`` for all of them. It is plain data (numpy arrays and Python scalars) so it
pickles across xdist workers and can be built from any array of samples in the self-tests.

Conventions
-----------
* Histogram bins are indexed by the *ordered key* of a value's bit pattern (see
  `reference.dtypes.FloatFormat.ordered_keys`): keys increase with the numeric value, -NaNs sit
  below -inf and +NaNs above +inf. Bin ``k`` holds keys ``[k << shift, ((k + 1) << shift) - 1]``
  with ``shift = bits - hist_bits``: an exact, contiguous interval of representable values, whose
  probability under the rounded law is ``RoundedLaw.hist_bin_probs()[k]``.
* Standardized values are ``z = (x - center) / scale`` in float64 with ``center``/``scale`` the
  rounded law's mean and std (the continuous law's std where the rounded one is 0), so that under the
  null ``E z = 0`` and ``E z^2 = 1``. Non-finite elements enter the sums as ``z = 0``; any of them
  fails the run anyway.
* Counts are Python ints, sums float64.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Summary:
    """Streaming summary of a candidate's output for one (candidate, case, dtype, device, stage):
    the common core below, and ``states``, the state of each statistic family folded, by name
    (read as ``summary.<family>``)."""

    dtype: str  # torch dtype name without the "torch." prefix, e.g. "bfloat16"
    shape: tuple  # the shape of the tensor the candidate fills on each call
    hist_bits: int  # 16 for 16-bit dtypes (8 for 8-bit), 20 for 32/64-bit
    center: float  # z = (x - center) / scale
    scale: float
    rn_a: float  # the rounded bounds of the case (float64; may be +-inf)
    rn_b: float
    a: float  # the exact bounds of the case
    b: float

    n: int = 0  # elements examined (all calls)
    n_calls: int = 0
    row_len: int = 0  # the length of the tensor's last dim (a row)
    # The shape axis: elements of a view's base written outside the view, and calls that returned
    # something other than the tensor they were given (both zero for a sampler working in place).
    n_written_outside: int = 0
    n_returned_other: int = 0

    # Timing (seconds): inside the candidate vs in the engine's folding.
    candidate_s: float = 0.0
    engine_s: float = 0.0
    # Extra facts the engine wants to pass on (e.g. which seed was used, a captured warning).
    notes: dict = field(default_factory=dict)

    # Sharded parameters (harness.sharded.part_fold, harness.sharded.ranks). A *part* folds one rank's
    # box of each call: `box` is (global offsets, local shape), `shape` stays the whole tensor's.
    # `Summary.merge` of the parts is the Summary of the whole. `sharding`: the layout facts only
    # sharding can break (harness.sharded.part_fold.ShardingStats), read by the checks `replicas`,
    # `shards`, `sharding`.
    box: tuple | None = None
    sharding: object | None = None

    # family name -> its state, in fold order (a state may be derived from earlier ones)
    states: dict = field(default_factory=dict)

    def __getattr__(self, name: str):
        states = self.__dict__.get("states")
        if states is not None and name in states:
            return states[name]
        raise AttributeError(f"the Summary has no field or family state {name!r}")

    def has(self, family: str) -> bool:
        """Whether the family `family` was folded into this Summary."""
        return family in self.states

    @classmethod
    def merge(cls, parts) -> "Summary":
        """The Summary of the whole tensor from the Summaries of disjoint parts of the same calls
        (one per rank of a sharded parameter).

        The core's counts add, timings take the slowest part; each family's state merges by its
        own rule (``type(state).merge(parts' states, whole)``, in fold order, so that a state can
        read the ones merged before it), where every part holds that state. The parts keep their
        own data; the result shares none of it."""
        parts = list(parts)
        if not parts:
            raise ValueError("Summary.merge: no parts")
        first = parts[0]
        for p in parts[1:]:
            same = (p.dtype, tuple(p.shape), p.hist_bits, p.center, p.scale)
            if same != (first.dtype, tuple(first.shape), first.hist_bits, first.center,
                        first.scale):
                raise ValueError("Summary.merge: parts of different tensors or laws")
            if p.n_calls != first.n_calls:
                raise ValueError(f"Summary.merge: parts saw different numbers of calls "
                                 f"({first.n_calls} and {p.n_calls})")
        out = cls(dtype=first.dtype, shape=tuple(first.shape), hist_bits=first.hist_bits,
                  center=first.center, scale=first.scale, rn_a=first.rn_a, rn_b=first.rn_b,
                  a=first.a, b=first.b, row_len=first.row_len)
        out.n_calls = first.n_calls
        for name in ("n", "n_written_outside", "n_returned_other"):
            setattr(out, name, sum(int(getattr(p, name)) for p in parts))
        for name, state in first.states.items():
            if all(name in p.states for p in parts):
                merged = type(state).merge([p.states[name] for p in parts], out)
                if merged is not None:
                    out.states[name] = merged
        out.candidate_s = max(float(p.candidate_s) for p in parts)
        out.engine_s = max(float(p.engine_s) for p in parts)
        out.notes = dict(first.notes)
        out.notes["parts"] = len(parts)
        out.notes["candidate_s_all_parts"] = sum(float(p.candidate_s) for p in parts)
        if any(p.notes.get("stopped_by_budget") for p in parts):
            out.notes["stopped_by_budget"] = True
        return out
