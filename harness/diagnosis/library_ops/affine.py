"""Laws of a sampler whose last step is done in the output dtype, value by value: what
`dtype-arithmetic` predicts for the resolution checks (equal pairs, the 16-bit lattices, the last
bits' classes) of a float32 or float64 output.

* `AffineLaw`: x = RN(RN(z std) + mean), z a value of the dtype drawn from the standard normal's
  rounded law, the values outside [RN(a), RN(b)] redrawn (torch's `normal_(mean, std)` and its
  redraw loop; a sampler drawing z exactly and scaling it in float32 writes the same law). The
  map z -> x is monotone, so each output value v owns an interval of z values, its preimage:
  empty where the product leaves v without one (std = 0.02 = 1.28 2^-6 leaves 22 % of the
  float32 lattice unreached), several values of z where the output is coarser. P(X = v) is the
  normal's mass on the union of their rounding cells.
* `PushedProposals`: rejection from uniform proposals x_j = RN(RN(j 2^-d (b - a)) + a), j <
  2^d equally likely (d = 24 in float32, 53 in float64: torch's CPU `uniform_(a, b)`), each
  accepted with probability proportional to the density at x_j: P(X = v) = c_v f(v) (b - a)
  2^-d, c_v the number of j that land on v (a preimage again: the map j -> x is monotone).

Both find a value's preimage by bisection on the monotone map in the dtype's own arithmetic (numpy:
IEEE, round to nearest even), so P(X = v) is known value by value (`PushedLaw.value_probs`).
From it: where the window holds at most `ENUMERATE` output values, every one is summed; else a
deterministic quadrature, `BLOCKS` runs of `RUN` consecutive output values, one at each
equal-mass quantile of the law, each run standing for 1 / `BLOCKS` of it (E_X[g(X)] as the
average of the runs' mass-weighted means of g); where the output is finer than the source (fewer
than half of a run's values have a preimage: uniform proposals near 0), the run is the distinct
images of `RUN` consecutive source indices instead, consecutive values of the support. Where the step is exact (std 1, mean 0) the
quadrature gives the law's collision probability within 3e-4 and its last-bit classes within
1e-6 (relative); between two quadratures 4x and 16x finer, the classes of z 0.3 in float32 move
by <= 3e-3 (relative).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special

from reference import TruncatedNormal
from reference.dtypes import float_format

#: numpy's types of the dtypes whose arithmetic is repeated: (real, unsigned word, sign bit,
#: random bits of the dtype's uniform).
ARITHMETIC = {"float32": (np.float32, np.uint32, 1 << 31, 24),
              "float64": (np.float64, np.uint64, 1 << 63, 53)}
#: A window holding at most this many output values is summed value by value.
ENUMERATE = 1 << 18
#: The quadrature otherwise: this many equal-mass quantiles, a run of this many consecutive
#: output values at each (2^18 values in all).
BLOCKS = 4096
RUN = 64
#: z is searched within +-Z_RANGE standard deviations (the normal puts nothing beyond).
Z_RANGE = 64.0
#: A preimage wider than this (in std units) is priced by the normal's CDF, a narrower one by the
#: density at its centre times its width (relative error ~ width^2 / 24).
WIDE = 1e-3


class Keys:
    """Ordered integer keys of one float dtype: key(x) < key(y) iff x < y, consecutive values
    consecutive keys, -0 and +0 one key (0). int64, and no overflow in the bisection's sums."""

    def __init__(self, dtype: str):
        self.real, self.word, self.sign, self.uniform_bits = ARITHMETIC[dtype]

    def of(self, values) -> np.ndarray:
        x = np.asarray(values, dtype=np.float64).astype(self.real)
        u = x.view(self.word).astype(np.uint64)
        mag = (u & np.uint64(self.sign - 1)).astype(np.int64)
        return np.where(u >= np.uint64(self.sign), -mag, mag)

    def values(self, keys) -> np.ndarray:
        """The dtype's values at `keys`, as the dtype's numpy type."""
        k = np.asarray(keys, dtype=np.int64)
        mag = np.abs(k).astype(np.uint64)
        u = np.where(k < 0, mag | np.uint64(self.sign), mag).astype(self.word)
        return u.view(self.real)

    def next_up(self, v: float) -> float:
        if not math.isfinite(v):
            return v
        return float(self.values(self.of(np.array([v])) + 1)[0])


#: `first_index` first tries brackets of these many indices either side of a guess.
BRACKETS = (1 << 4, 1 << 12)


def first_index(image, targets: np.ndarray, lo: int, hi: int,
                guess: np.ndarray | None = None) -> np.ndarray:
    """The smallest integer i in [lo, hi] whose `image(i)` is >= each target (hi + 1 where none):
    bisection on a monotone non-decreasing map, vectorized over the targets. With a `guess`, the
    brackets guess +- BRACKETS are tested first, each narrowing the search on whichever side it
    holds (a guess off by more costs the full search, never a wrong answer)."""
    shape = np.shape(targets)
    goal = np.asarray(targets).ravel()
    low = np.full(goal.size, lo, dtype=np.int64)
    high = np.full(goal.size, hi + 1, dtype=np.int64)
    if guess is not None:
        g = np.clip(np.asarray(guess, dtype=np.int64).ravel(), lo, hi)
        for width in BRACKETS:
            for end in (np.maximum(g - width, lo), np.minimum(g + width, hi)):
                open_ = low < high  # settled ones stay: their bounds may sit at hi + 1
                # and their end is clipped to hi: the image is only ever asked inside [lo, hi]
                end = np.minimum(np.clip(end, low, np.maximum(high - 1, low)), hi)
                up = image(end) >= goal
                high = np.where(open_ & up, end, high)
                low = np.where(open_ & ~up, end + 1, low)
    todo = np.arange(goal.size)
    while True:
        todo = todo[low[todo] < high[todo]]
        if not todo.size:
            return low.reshape(shape)
        a, b = low[todo], high[todo]
        mid = (a >> 1) + (b >> 1) + (a & b & 1)
        up = image(mid) >= goal[todo]
        high[todo] = np.where(up, mid, b)
        low[todo] = np.where(up, a, mid + 1)


class PushedLaw:
    """The shared part: the window, the preimages, the runs, and what the resolution checks read
    from them. A subclass names its source (the integers the map is monotone on: `span`,
    `image`, `guess`) and prices a preimage (`mass`)."""

    def __init__(self, dist, dtype: str):
        if dtype not in ARITHMETIC:
            raise ValueError(f"no numpy arithmetic for {dtype}")
        self.dist = dist
        self.keys = Keys(dtype)
        self.real = self.keys.real
        fmt = float_format(dtype)
        self.lo = float(fmt.round(np.array([float(dist.a)]))[0]) if math.isfinite(dist.a) \
            else -math.inf
        self.hi = float(fmt.round(np.array([float(dist.b)]))[0]) if math.isfinite(dist.b) \
            else math.inf
        self.unit = TruncatedNormal(0.0, 1.0, dist.alpha, dist.beta)

    # -- what a subclass defines ---------------------------------------------------------------
    span: tuple[int, int] = (0, 0)  # the source's first and last index

    def image(self, index: np.ndarray) -> np.ndarray:  # pragma: no cover - subclasses
        """The output value (the dtype's numpy type) of each source index."""
        raise NotImplementedError

    def guess(self, values: np.ndarray) -> np.ndarray:  # pragma: no cover - subclasses
        """A source index near the preimage of each output value (float64)."""
        raise NotImplementedError

    def mass(self, values: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        """P(X = v) of output values v whose preimage is the source indices [start, stop)."""
        raise NotImplementedError  # pragma: no cover - subclasses

    # -- preimages -----------------------------------------------------------------------------
    def first_source(self, targets: np.ndarray) -> np.ndarray:
        """The first source index whose image is >= each target value."""
        targets = np.asarray(targets, dtype=self.real)
        return first_index(self.image, targets, *self.span,
                           guess=self.guess(targets.astype(np.float64)))

    def value_probs(self, keys: np.ndarray) -> np.ndarray:
        """P(X = v) at output `keys` (shape (runs, L)), zero outside [RN(a), RN(b)]: a run of
        consecutive keys shares its L + 1 preimage boundaries, any other key has its own two."""
        keys = np.asarray(keys, dtype=np.int64)
        if np.all(np.diff(keys, axis=-1) == 1):
            bounds = self.first_source(self.keys.values(
                np.concatenate([keys, keys[..., -1:] + 1], axis=-1)))
            start, stop = bounds[..., :-1], bounds[..., 1:]
        else:
            start = self.first_source(self.keys.values(keys))
            stop = self.first_source(self.keys.values(keys + 1))
        values = self.keys.values(keys).astype(np.float64)
        mass = np.where(stop > start, self.mass(values, start, stop), 0.0)
        return np.where((values >= self.lo) & (values <= self.hi), mass, 0.0)

    # -- the runs ------------------------------------------------------------------------------
    def quantiles(self) -> np.ndarray:
        """X's values at the BLOCKS equal-mass quantiles of the truncated normal."""
        z = self.unit.ppf((np.arange(BLOCKS) + 0.5) / BLOCKS)
        return z * float(self.dist.scale) + float(self.dist.loc)

    @functools.cached_property
    def window_keys(self) -> tuple[int, int]:
        """The output keys of the window's ends (the 1e-30 quantiles where it is unbounded)."""
        ends = self.unit.ppf(np.array([1e-30, 1.0 - 1e-30]))
        ends = ends * float(self.dist.scale) + float(self.dist.loc)
        lo = max(self.lo, float(ends[0]))
        hi = min(self.hi, float(ends[1]))
        k = self.keys.of(np.array([lo, hi]))
        return int(k[0]), int(k[1])

    @functools.cached_property
    def runs(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, probs), each (runs, L): every output value of the window as one run where it
        holds at most ENUMERATE of them, else BLOCKS runs at the equal-mass quantiles, each RUN
        consecutive output values, or, where fewer than half of those have a preimage (the
        output finer than the source there: uniform proposals near 0), the distinct images of
        RUN consecutive source indices (consecutive values of the support: a run of output
        values would miss it); runs the law gives no mass are dropped."""
        klo, khi = self.window_keys
        if khi - klo + 1 <= ENUMERATE:
            keys = np.arange(klo, khi + 1, dtype=np.int64)[None, :]
            return keys, self.value_probs(keys)
        centres = self.quantiles()
        keys = self.keys.of(centres)[:, None] + np.arange(-(RUN // 2), RUN // 2)[None, :]
        probs = self.value_probs(keys)
        sparse = np.count_nonzero(probs, axis=1) < RUN // 2
        if sparse.any():
            first = np.clip(self.guess(centres[sparse]) - RUN // 2, self.span[0],
                            self.span[1] - RUN + 1)
            images = self.image(first[:, None] + np.arange(RUN)[None, :])
            support = self.keys.of(images.astype(np.float64))
            repeat = np.zeros(support.shape, dtype=bool)
            repeat[:, 1:] = support[:, 1:] == support[:, :-1]
            keys[sparse] = support
            probs[sparse] = np.where(repeat, 0.0, self.value_probs(support))
        held = probs.sum(axis=1) > 0
        return keys[held], probs[held]

    def run_average(self, values: np.ndarray) -> float:
        """E_X[g(X)] from g's `values` on the runs (shape (runs, L)): each run's mass-weighted
        mean, the runs averaged with equal weight."""
        _, probs = self.runs
        weights = probs / probs.sum(axis=1, keepdims=True)
        return float(np.mean(np.sum(weights * values, axis=1)))

    @functools.cached_property
    def collision_prob(self) -> float:
        """sum_v P(X = v)^2 = E_X[P(X = v)]."""
        keys, probs = self.runs
        if keys.shape[0] == 1:
            return float(np.sum(probs * probs))
        return self.run_average(probs)

    def low_bit_shares(self, bits: int) -> np.ndarray:
        """The shares of the 2^bits classes of the last bits of the output's bit pattern."""
        keys, probs = self.runs
        words = self.keys.values(keys).view(self.keys.word).astype(np.int64)
        weights = probs / probs.sum(axis=1, keepdims=True)  # each run's mass-weighted share
        shares = np.bincount(np.bitwise_and(words, (1 << bits) - 1).ravel(),
                             weights=weights.ravel(), minlength=1 << bits)
        total = shares.sum()
        return shares / total if total > 0 else shares  # no mass in the window: no shares

    def lattice_mass(self, coarse: str) -> float | None:
        """P(X on the lattice of a 16-bit format): every one of its values in the window, each
        with its own P(X = v) (None for a format wider than 16 bits)."""
        fmt = float_format(coarse)
        if fmt.bits > 16:
            return None
        values = fmt.values_from_keys(np.arange(1 << fmt.bits))
        ends = self.keys.values(np.array(self.window_keys)).astype(np.float64)
        values = np.unique(values[np.isfinite(values) & (values >= ends[0])
                                  & (values <= ends[1])])
        if values.size == 0:
            return 0.0
        return float(np.sum(self.value_probs(self.keys.of(values)[:, None])))


class AffineLaw(PushedLaw):
    """x = RN(RN(z std) + mean) in the dtype, z the standard normal rounded to it, conditioned on
    RN(a) <= x <= RN(b) (the module docstring). The source: z's ordered keys within +-Z_RANGE."""

    def __init__(self, dist, dtype: str):
        super().__init__(dist, dtype)
        self.scale = self.real(float(dist.scale))
        self.loc = self.real(float(dist.loc))
        zk = self.keys.of(np.array([-Z_RANGE, Z_RANGE]))
        self.span = (int(zk[0]), int(zk[1]))

    def image(self, index: np.ndarray) -> np.ndarray:
        """x = RN(RN(z std) + mean) of the z values at keys `index`, in the dtype's arithmetic."""
        with np.errstate(all="ignore"):
            return self.keys.values(index) * self.scale + self.loc

    def guess(self, values: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            z = (np.asarray(values, dtype=np.float64) - float(self.loc)) / float(self.scale)
        return self.keys.of(np.clip(np.nan_to_num(z), -Z_RANGE, Z_RANGE))

    def quantiles(self) -> np.ndarray:
        z = self.unit.ppf((np.arange(BLOCKS) + 0.5) / BLOCKS).astype(self.real)
        with np.errstate(all="ignore"):
            return (z * self.scale + self.loc).astype(np.float64)

    def interval_mass(self, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        """The standard normal's mass on the rounding cells of the z values with keys in
        [start, stop) (0 where stop <= start)."""
        a_left = self.keys.values(start - 1).astype(np.float64)
        a_at = self.keys.values(start).astype(np.float64)
        b_left = self.keys.values(stop - 1).astype(np.float64)
        b_at = self.keys.values(stop).astype(np.float64)
        # edge to edge without cancellation: whole spacings plus the two half ones at the ends
        width = (b_left - a_at) + 0.5 * (a_at - a_left) + 0.5 * (b_at - b_left)
        lo_edge = a_at - 0.5 * (a_at - a_left)
        hi_edge = b_left + 0.5 * (b_at - b_left)
        centre = 0.5 * (lo_edge + hi_edge)
        narrow = np.exp(-0.5 * centre * centre) / math.sqrt(2.0 * math.pi) * width
        wide = np.where(centre > 0, special.ndtr(-lo_edge) - special.ndtr(-hi_edge),
                        special.ndtr(hi_edge) - special.ndtr(lo_edge))
        return np.where(stop > start, np.where(width > WIDE, wide, narrow), 0.0)

    @functools.cached_property
    def accepted(self) -> float:
        """The normal's mass on the z values whose image lies in [RN(a), RN(b)]."""
        ends = self.first_source(np.array([self.lo, self.keys.next_up(self.hi)]))
        return float(self.interval_mass(ends[:1], ends[1:])[0])

    def mass(self, values: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        if not self.accepted > 0:  # no z value reaches the window: the law writes nothing
            return np.zeros(np.shape(start), dtype=np.float64)
        return self.interval_mass(start, stop) / self.accepted


class PushedProposals(PushedLaw):
    """Rejection from the dtype's uniform proposals on [RN(a), RN(b)] (the module docstring).
    The source: the proposal index j, 0 <= j < 2^d."""

    def __init__(self, dist, dtype: str):
        super().__init__(dist, dtype)
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.hi > self.lo):
            raise ValueError("uniform proposals need a finite window")
        self.bits = self.keys.uniform_bits
        self.span = (0, (1 << self.bits) - 1)
        self.step = self.real(2.0**-self.bits)
        self.width = self.real(self.hi) - self.real(self.lo)

    def image(self, index: np.ndarray) -> np.ndarray:
        """x_j = RN(RN(j 2^-d (b - a)) + a), in the dtype's arithmetic (j 2^-d is exact)."""
        with np.errstate(all="ignore"):
            return (index.astype(self.real) * self.step) * self.width + self.real(self.lo)

    def guess(self, values: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            j = (np.asarray(values, dtype=np.float64) - self.lo) / (self.hi - self.lo)
        return np.clip(np.nan_to_num(j * 2.0**self.bits), *self.span).astype(np.int64)

    def mass(self, values: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
        density = np.asarray(self.dist.pdf(values), dtype=np.float64)
        return (stop - start) * density * (float(self.width) * 2.0**-self.bits)
