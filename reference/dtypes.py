"""Dtype facts: the bit-level lattice of every floating format a sampler can write into.

`float_format(torch_dtype)` returns a `FloatFormat` that knows, exactly and vectorized over numpy
float64 arrays:

* the format's parameters (bits, exponent/mantissa widths, largest finite value, subnormals, inf/NaN);
* how a float64 value is rounded into it (`round`: one round-to-nearest, ties-to-even, with torch's
  overflow rule for the format) and how torch's own ``tensor(float64).to(dtype)`` does it
  (`round_torch`, see below);
* the *ordered key* of a bit pattern, shared with the engine (which computes it in torch):
  for a w-bit pattern u, ``key = (~u) & mask`` if the sign bit is set, else ``u | signbit``.
  Keys increase with the value, -0 sits right below +0, -NaNs below -inf, +NaNs above +inf.
  Histogram bin k holds keys ``[k << s, ((k + 1) << s) - 1]``, ``s = bits - hist_bits``;
* the rounding cell of every representable value (`cell_edges`), from which `reference.rounded`
  builds the rounded law.

Everything is integer bit manipulation on the float64 encoding (or exact power-of-two scaling), so
no result is ever rounded twice.

Torch's rules, checked by casting (torch 2.13, CPU):

* float8_e4m3fn has no inf; torch *saturates*: every |x| > 448 (inf included) becomes +-448;
  NaN stays NaN (0x7f/0xff).
* float8_e5m2 is IEEE-like: |x| >= 61440 (the midpoint above 57344, whose mantissa is odd) -> +-inf.
* float8_e4m3fnuz / float8_e5m2fnuz have no -0 and a single NaN pattern 0x80; overflow (and inf)
  becomes that NaN, tiny negatives round to +0.
* float16/bfloat16/float8 casts *from float64* go through float32: torch computes
  ``RN_fmt(RN_f32(x))``, which differs from one RN for x within half a float32 ulp of a
  midpoint of the format (on the side of the odd neighbour). `round` is the single RN of the
  canonical law; `round_torch` reproduces torch bit for bit. Casts from float32 are single roundings,
  so the two agree on every float32 input.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import torch

__all__ = ["FloatFormat", "float_format", "SUPPORTED_DTYPES", "DTYPES", "DEFAULT_DTYPE_NAMES",
           "DTYPE_ALIASES", "dtype_name", "torch_dtype"]

_U64 = np.uint64
_I64 = np.int64


@dataclass(frozen=True)
class FloatFormat:
    """One floating format: parameters plus exact, vectorized lattice operations (numpy float64)."""

    name: str
    bits: int
    exp_bits: int
    man_bits: int
    max_finite: float
    min_subnormal: float
    has_inf: bool
    has_nan: bool
    torch_dtype: object = field(compare=False, repr=False)
    hist_bits: int
    bias: int
    min_normal: float
    overflow: str  # "inf" (IEEE), "saturate" (e4m3fn), "nan" (fnuz)
    has_neg_zero: bool

    # ---------------------------------------------------------------- bit patterns <-> float64
    @functools.cached_property
    def _mask(self) -> int:
        return (1 << self.bits) - 1

    @functools.cached_property
    def _sign(self) -> int:
        return 1 << (self.bits - 1)

    @functools.cached_property
    def _max_mag(self) -> int:
        """Magnitude pattern (sign bit clear) of max_finite."""
        e, m = self.exp_bits, self.man_bits
        if self.overflow == "inf":  # IEEE: top exponent reserved for inf/NaN
            return ((1 << e) - 2) << m | ((1 << m) - 1)
        if self.overflow == "saturate":  # e4m3fn: only all-ones is NaN
            return ((1 << e) - 1) << m | ((1 << m) - 2)
        return (1 << (e + m)) - 1  # fnuz: every magnitude is finite

    @functools.cached_property
    def _inf_mag(self) -> int:
        return ((1 << self.exp_bits) - 1) << self.man_bits

    @functools.cached_property
    def _nan_mag(self) -> int:
        # The pattern torch writes for NaN (sign aside): quiet NaN for IEEE formats, all ones for
        # e4m3fn, 0x80 (sign bit only) for the fnuz formats.
        if self.overflow == "nan":
            return self._sign
        if self.bits <= 8:
            return self._mask >> 1
        return self._inf_mag | (1 << (self.man_bits - 1))

    def encode(self, x) -> np.ndarray:
        """Bit patterns (uint64) of RN(x): ties to even, torch's overflow rule, NaN -> a NaN pattern."""
        x = np.asarray(x, dtype=np.float64)
        if self.bits == 32:
            # The hardware float64 -> float32 conversion is one IEEE RN-even (overflow to inf), the
            # same as `encode_int`, several times faster (the tests compare both with torch).
            with np.errstate(over="ignore", invalid="ignore"):
                return x.astype(np.float32).view(np.uint32).astype(_U64)
        return self.encode_int(x)

    def encode_int(self, x) -> np.ndarray:
        """Integer RN-even encoding, exact for every format (float64 input, no double rounding)."""
        x = np.asarray(x, dtype=np.float64)
        u = np.ascontiguousarray(x).view(_U64).reshape(x.shape)
        if self.bits == 64:
            return u.copy()
        neg = (u >> _U64(63)).astype(_I64)
        ua = (u & _U64(0x7FFFFFFFFFFFFFFF)).astype(_I64)
        e64 = ua >> 52
        frac = ua & ((1 << 52) - 1)
        sub64 = e64 == 0
        sig = np.where(sub64, frac, frac | (1 << 52))
        e_unb = np.where(sub64, -1022, e64 - 1023)
        m = self.man_bits
        emin = 1 - self.bias
        # Drop k low bits of the 53-bit significand: k places the result on the format's quantum
        # 2**(max(e, emin) - m); capped so that shifts stay inside int64 (sig < 2**53 < half).
        k = np.minimum(52 - m + np.maximum(0, emin - e_unb), 60)
        r = sig >> k
        rem = sig & ((np.int64(1) << k) - 1)
        half = np.int64(1) << (k - 1)
        r = r + ((rem > half) | ((rem == half) & ((r & 1) == 1)))
        # Biased exponent of the quantum's binade; (be - 1) << m plus r (implicit bit included)
        # is the magnitude pattern, and a carry out of the mantissa lands in the next binade.
        be = np.minimum(np.maximum(e_unb, emin) + self.bias, (1 << self.exp_bits) + 2)
        mag = ((be - 1) << m) + r
        over = mag > self._max_mag
        if self.overflow == "inf":
            mag = np.where(over, self._inf_mag, mag)
        elif self.overflow == "saturate":
            mag = np.where(over, self._max_mag, mag)
        nan_in = np.isnan(x)
        if self.overflow == "nan":
            out = np.where(mag == 0, 0, mag | (neg << (self.bits - 1)))
            out = np.where(over | nan_in, self._nan_mag, out)
        else:
            mag = np.where(nan_in, self._nan_mag, mag)
            out = mag | (neg << (self.bits - 1))
        return out.astype(_U64)

    def decode(self, patterns) -> np.ndarray:
        """float64 values of bit patterns (NaN for NaN patterns)."""
        u = np.asarray(patterns).astype(_U64) & _U64(self._mask)
        if self.bits == 64:
            return np.ascontiguousarray(u).view(np.float64).reshape(u.shape).copy()
        if self.bits == 32:
            with np.errstate(invalid="ignore"):  # signalling NaN patterns
                return u.astype(np.uint32).view(np.float32).astype(np.float64)
        return self._bits_table[u.astype(np.intp)]

    def decode_int(self, patterns) -> np.ndarray:
        """Integer decoding (the reference for every format; `decode` uses tables / hardware casts)."""
        u = np.asarray(patterns).astype(_U64) & _U64(self._mask)
        if self.bits == 64:
            return np.ascontiguousarray(u).view(np.float64).reshape(u.shape).copy()
        u = u.astype(_I64)
        m = self.man_bits
        neg = (u >> (self.bits - 1)) & 1
        e = (u >> m) & ((1 << self.exp_bits) - 1)
        f = u & ((1 << m) - 1)
        sig = np.where(e == 0, f, f | (1 << m)).astype(np.float64)
        mag = np.ldexp(sig, (np.maximum(e, 1) - self.bias - m).astype(np.int32))
        mag = np.where((u & (self._mask >> 1)) > self._max_mag, np.nan, mag)
        if self.overflow == "inf":
            mag = np.where((u & (self._mask >> 1)) == self._inf_mag, np.inf, mag)
        val = np.where(neg == 1, -mag, mag)
        if self.overflow == "nan":
            val = np.where(u == self._sign, np.nan, val)
        return val

    # ---------------------------------------------------------------- ordered keys
    def keys_from_bits(self, u) -> np.ndarray:
        u = np.asarray(u).astype(_U64)
        mask, sign = _U64(self._mask), _U64(self._sign)
        return np.where((u & sign) != 0, (~u) & mask, u | sign).astype(_U64)

    def bits_from_keys(self, keys) -> np.ndarray:
        k = np.asarray(keys).astype(_U64)
        mask, sign = _U64(self._mask), _U64(self._sign)
        return np.where((k & sign) != 0, k & ~sign & mask, (~k) & mask).astype(_U64)

    def ordered_keys(self, values_f64) -> np.ndarray:
        """Ordered keys (uint64) of float64 values; a value that is not representable is first rounded (RN)."""
        return self.keys_from_bits(self.encode(values_f64))

    def values_from_keys(self, keys) -> np.ndarray:
        """Inverse of `ordered_keys`: float64 values, NaN for NaN patterns."""
        if self.bits <= 16:
            return self._key_table[np.asarray(keys).astype(np.intp)]
        return self.decode(self.bits_from_keys(keys))

    @functools.cached_property
    def _bits_table(self) -> np.ndarray:
        t = self.decode_int(np.arange(1 << self.bits, dtype=_U64))
        t.setflags(write=False)
        return t

    @functools.cached_property
    def _key_table(self) -> np.ndarray:
        t = self.decode(self.bits_from_keys(np.arange(1 << self.bits, dtype=_U64)))
        t.setflags(write=False)
        return t

    @functools.cached_property
    def finite_key_range(self) -> tuple[int, int]:
        """Keys of -max_finite and +max_finite; every finite value's key lies in between."""
        k = self.ordered_keys(np.array([-self.max_finite, self.max_finite]))
        return int(k[0]), int(k[1])

    # ---------------------------------------------------------------- rounding
    def round(self, x) -> np.ndarray:
        """RN(x) ties-to-even into the format, as float64 (one rounding; torch's overflow rule)."""
        x = np.asarray(x, dtype=np.float64)
        if self.bits == 64:
            return x.copy()
        return self.decode(self.encode(x))

    def round_torch(self, x) -> np.ndarray:
        """What torch's ``torch.tensor(x, dtype=float64).to(dtype)`` writes: via float32 for narrower formats."""
        x = np.asarray(x, dtype=np.float64)
        if self.bits < 32:
            x = _F32.round(x)
        return self.round(x)

    # ---------------------------------------------------------------- lattice neighbours
    def step_key(self, keys: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Key one step up/down (step=+-1), skipping the fnuz NaN in the middle; and whether it exists."""
        k = np.asarray(keys).astype(_U64)
        valid = (k != _U64(self._mask)) if step > 0 else (k != _U64(0))
        k = k + _U64(1) if step > 0 else k - _U64(1)
        if self.overflow == "nan":
            # The fnuz NaN pattern 0x80 sits between -min_subnormal and +0 in key order.
            nan_key = self.keys_from_bits(np.array([self._sign]))[0]
            k = np.where(k == nan_key, k + _U64(1) if step > 0 else k - _U64(1), k)
        k = k & _U64(self._mask)
        return k, valid

    def next_up(self, v) -> np.ndarray:
        """Smallest lattice value > v (v representable; +-0 -> min_subnormal; max_finite -> +inf where
        the format has inf, NaN where it has no larger value; +inf -> +inf)."""
        return self._neighbour(v, +1)

    def next_down(self, v) -> np.ndarray:
        """Largest lattice value < v; mirror of `next_up`."""
        return self._neighbour(v, -1)

    def _neighbour(self, v, step: int) -> np.ndarray:
        v = np.asarray(v, dtype=np.float64)
        # -0 and +0 are one value numerically: step from the zero on the far side.
        vv = np.where(v == 0, 0.0 if step > 0 else -0.0, v)
        k, valid = self.step_key(self.ordered_keys(vv), step)
        out = np.where(valid, self.values_from_keys(k), np.nan)
        out = np.where(np.isinf(v) & (np.sign(v) == step), v, out)
        out = np.where(out == 0, 0.0, out)  # the neighbour of +-min_subnormal towards 0 is +0
        return np.where(np.isnan(v), np.nan, out)

    # ---------------------------------------------------------------- rounding cells
    @functools.cached_property
    def overflow_threshold(self) -> float:
        """max_finite + half its ulp: |x| beyond rounds to inf/NaN (or saturates). inf for float64."""
        if self.bits == 64:
            return np.inf
        _, e = np.frexp(self.max_finite)
        return float(self.max_finite + np.ldexp(1.0, int(e) - 1 - self.man_bits - 1))

    def _edge(self, kv: np.ndarray, kw: np.ndarray, via_float32: bool, origin: float = 0.0) -> np.ndarray:
        """Cell edge between the key-adjacent finite values at keys kv < kw: their midpoint minus
        `origin`, as (v - origin) + (w - v) / 2. Exact in float64 for formats narrower than float64
        (origin 0); for float64 exact wherever v - origin is (v within a factor 2 of the origin:
        a law centred on its own window, `RoundedLaw`), else its float64 RN."""
        v = self.values_from_keys(kv)
        w = self.values_from_keys(kw)
        with np.errstate(over="ignore", invalid="ignore"):
            e = (v - origin) + (w - v) * 0.5
        if via_float32 and self.bits < 32:
            # torch rounds to float32 first: the whole float32 cell of the midpoint goes to the even
            # neighbour, so the edge moves half a float32 ulp towards the odd one. The midpoint's
            # float32 pattern is even, so it wins ties at the moved edge (closedness only).
            # The edge between -0 and +0 stays at 0: float32 keeps the sign of a tiny x.
            v_odd = (self.bits_from_keys(kv) & _U64(1)) == 1
            e = np.where(e == 0, e, np.where(v_odd, e - _half_ulp32(e), e + _half_ulp32(e)))
        return e

    def overflow_edge(self, via_float32: bool = False) -> float:
        """|x| above which RN(x) leaves the finite range (overflow neighbour = pattern max + 1):
        `overflow_threshold`, moved half a float32 ulp where torch's cast goes via float32."""
        thr = self.overflow_threshold
        if via_float32 and self.bits < 32 and np.isfinite(thr):
            odd_max = self._max_mag & 1
            h = float(_half_ulp32(np.array([thr]))[0])
            thr = thr - h if odd_max else thr + h
        return thr

    def key_cell_edges(self, keys, via_float32: bool = False, origin: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Rounding cells of the finite values at ordered keys (in `finite_key_range`, not NaN)."""
        return (self.key_cell_edge(keys, -1, via_float32, origin),
                self.key_cell_edge(keys, +1, via_float32, origin))

    def key_cell_edge(self, keys, side: int, via_float32: bool = False, origin: float = 0.0) -> np.ndarray:
        """Lower (side=-1) or upper (side=+1) cell edge of the finite values at ordered keys, minus
        `origin` (see `_edge`)."""
        k = np.asarray(keys).astype(_U64)
        klo, khi = (_U64(x) for x in self.finite_key_range)
        kn = np.clip(self.step_key(k, side)[0], klo, khi)
        e = self._edge(kn, k, via_float32, origin) if side < 0 else self._edge(k, kn, via_float32, origin)
        outer = np.inf if self.overflow == "saturate" else self.overflow_edge(via_float32)
        return np.where(k == (klo if side < 0 else khi), side * outer - origin, e)

    def cell_edges(self, values, via_float32: bool = False, origin: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Rounding cell [lo, hi] of lattice values: RN(x) == v for lo < x < hi.

        Cells follow key order, so -0 owns [-min_subnormal/2, 0] and +0 owns [0, min_subnormal/2] (a
        tiny negative x rounds to -0; fnuz formats give +0 the whole cell). +-max_finite own up to
        +-overflow_threshold (to +-inf where the format saturates); +-inf own the rest. NaN, or a
        value not on the lattice, gets (NaN, NaN). ``via_float32=True`` gives the cells of torch's
        float64 -> float32 -> format cast. ``origin``: the edges minus it (see `_edge`).
        """
        v = np.asarray(values, dtype=np.float64)
        u = self.encode(v)
        ok = (self.decode(u) == v) & ~np.isnan(v)
        fin = ok & np.isfinite(v)
        k = self.keys_from_bits(u)
        klo = _U64(self.finite_key_range[0])
        lo, hi = self.key_cell_edges(np.where(fin, k, klo), via_float32, origin)
        thr = self.overflow_edge(via_float32)
        lo = np.where(fin, lo, np.where(ok & (v > 0), thr - origin, np.where(ok, -np.inf, np.nan)))
        hi = np.where(fin, hi, np.where(ok & (v > 0), np.inf, np.where(ok, -thr - origin, np.nan)))
        return lo, hi

    def overflow_cells(self, via_float32: bool = False) -> list[tuple[int, float, float]]:
        """(key, lo, hi) of the non-finite patterns that receive mass: +-inf, or the fnuz NaN (both tails)."""
        if self.overflow == "saturate" or self.bits == 64:
            return []
        thr = self.overflow_edge(via_float32)
        if self.overflow == "inf":
            k = self.ordered_keys(np.array([-np.inf, np.inf]))
            return [(int(k[0]), -np.inf, -thr), (int(k[1]), thr, np.inf)]
        knan = int(self.keys_from_bits(np.array([self._sign]))[0])
        return [(knan, -np.inf, -thr), (knan, thr, np.inf)]

    # ---------------------------------------------------------------- histogram bins
    def hist_bin_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Smallest and largest *finite* value of each ordered-key histogram bin (NaN where none)."""
        return self._hist_bounds

    @functools.cached_property
    def _hist_bounds(self):
        shift = self.bits - self.hist_bits
        kb = np.arange(1 << self.hist_bits, dtype=_U64)
        klo, khi = (_U64(x) for x in self.finite_key_range)
        lo_k = np.maximum(kb << _U64(shift), klo)
        hi_k = np.minimum(((kb + _U64(1)) << _U64(shift)) - _U64(1), khi)
        empty = lo_k > hi_k
        lo = self.values_from_keys(np.where(empty, klo, lo_k))
        hi = self.values_from_keys(np.where(empty, klo, hi_k))
        if self.overflow == "nan":
            # The fnuz NaN is the only non-finite pattern and a bin of its own (hist_bits == bits).
            nan_bin = np.isnan(lo)
            empty |= nan_bin
        lo = np.where(empty, np.nan, lo)
        hi = np.where(empty, np.nan, hi)
        lo.setflags(write=False)
        hi.setflags(write=False)
        return lo, hi

    def spacing(self, v) -> np.ndarray:
        """Lattice spacing (ulp) of the binade holding representable finite v (min_subnormal near 0)."""
        v = np.asarray(v, dtype=np.float64)
        _, e = np.frexp(np.abs(v))
        ex = np.maximum(e.astype(np.int32) - 1, 1 - self.bias)
        return np.ldexp(1.0, ex - self.man_bits)


def _half_ulp32(e: np.ndarray) -> np.ndarray:
    """Half the float32 spacing at |e| (float32 subnormal spacing below 2**-126)."""
    _, ex = np.frexp(e)
    return np.ldexp(1.0, np.maximum(ex.astype(np.int32) - 1, -126) - 24)


_SPECS = {
    # name: (bits, exp_bits, man_bits, bias, overflow, has_neg_zero)
    "float64": (64, 11, 52, 1023, "inf", True),
    "float32": (32, 8, 23, 127, "inf", True),
    "float16": (16, 5, 10, 15, "inf", True),
    "bfloat16": (16, 8, 7, 127, "inf", True),
    "float8_e5m2": (8, 5, 2, 15, "inf", True),
    "float8_e4m3fn": (8, 4, 3, 7, "saturate", True),
    "float8_e5m2fnuz": (8, 5, 2, 16, "nan", False),
    "float8_e4m3fnuz": (8, 4, 3, 8, "nan", False),
}


def _make(name: str) -> FloatFormat:
    bits, eb, mb, bias, overflow, negz = _SPECS[name]
    tdt = getattr(torch, name)
    fi = torch.finfo(tdt)
    max_finite = float(fi.max)
    if bits == 64:
        min_sub = float(np.nextafter(0.0, 1.0))
    else:
        min_sub = float(np.ldexp(1.0, 1 - bias - mb))
    return FloatFormat(
        name=name,
        bits=bits,
        exp_bits=eb,
        man_bits=mb,
        max_finite=max_finite,
        min_subnormal=min_sub,
        has_inf=overflow == "inf",
        has_nan=True,
        torch_dtype=tdt,
        hist_bits=bits if bits <= 16 else 20,
        bias=bias,
        min_normal=float(fi.smallest_normal),
        overflow=overflow,
        has_neg_zero=negz,
    )


SUPPORTED_DTYPES = tuple(getattr(torch, n) for n in _SPECS if hasattr(torch, n))

# ---------------------------------------------------------------- the dtype table (one source)

#: The dtypes a run covers by default, by name, in the order reports list them.
DEFAULT_DTYPE_NAMES = ("float64", "float32", "float16", "bfloat16")
#: Every dtype the harness runs by name (`--dtypes`, rows, reports): the defaults, then the float8
#: formats this torch has.
DTYPES: dict = {name: getattr(torch, name)
                for name in DEFAULT_DTYPE_NAMES + ("float8_e4m3fn", "float8_e5m2")
                if hasattr(torch, name)}
#: Other spellings of the default dtypes that candidate declarations may use.
DTYPE_ALIASES = {"double": "float64", "fp64": "float64", "f64": "float64",
                 "float": "float32", "fp32": "float32", "f32": "float32",
                 "half": "float16", "fp16": "float16", "f16": "float16",
                 "bf16": "bfloat16"}


def dtype_name(dtype) -> str:
    """The name of a torch dtype as rows and options spell it: ``torch.bfloat16`` -> "bfloat16"."""
    return str(dtype).removeprefix("torch.")


def torch_dtype(dtype):
    """The torch dtype of a name in `DTYPES`, an alias (`DTYPE_ALIASES`), "torch.<name>", or a
    torch dtype (returned as is); ValueError naming the known names otherwise."""
    if isinstance(dtype, torch.dtype):
        return dtype
    key = str(dtype).strip().lower().removeprefix("torch.")
    key = DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        known = sorted(set(DTYPES) | set(DTYPE_ALIASES))
        raise ValueError(f"unknown dtype {dtype!r} (known: {', '.join(known)})")
    return DTYPES[key]

_F32 = _make("float32")


@functools.lru_cache(maxsize=None)
def _by_name(name: str) -> FloatFormat:
    if name not in _SPECS or not hasattr(torch, name):
        raise ValueError(
            f"unsupported dtype {name!r}: supported are {', '.join(n for n in _SPECS if hasattr(torch, n))}"
        )
    return _F32 if name == "float32" else _make(name)


def float_format(dtype) -> FloatFormat:
    """The FloatFormat of a torch floating dtype (or its name, e.g. "bfloat16" / "torch.bfloat16")."""
    if isinstance(dtype, FloatFormat):
        return dtype
    if isinstance(dtype, torch.dtype):
        name = str(dtype).removeprefix("torch.")
    else:
        name = str(dtype).removeprefix("torch.")
    return _by_name(name)
