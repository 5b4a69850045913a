"""The libraries' own sampling kernels, repeated step by step from their sources, for
`coarse-construction` to enumerate: NumPyro's ``TruncatedNormal`` (its ``icdf`` op by op, on
JAX's uniform and JAX's ndtri, `harness.diagnosis.library_ops.xla_cpu`), Paddle's
``truncated_gaussian_random`` CPU kernel (its uniform from a 64-bit word, its own Erfinv, C++'s
mix of double and float steps, the clamp to float32 bounds) and TensorFlow's
``parameterized_truncated_normal`` kernel (its uniform and exponential rejection samplers),
each in float32 and float64.

Each is a small frozen class: ``of(law)`` builds it on a RoundedLaw (None where the library
cannot express the law); ``v_of`` maps lattice keys to the value handed to the inverse CDF and
``x_of`` that value to the output (TensorFlow's: ``proposals`` and ``outputs``); ``on_cells``
gives the output at uniforms in [0, 1] for a law held on cells; ``enumeration`` says how its
law is enumerated. They are models of a library's arithmetic for naming a mechanism, never the
law a sampler is judged against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from reference.dtypes import float_format

from . import libm, xla_cpu


class MantissaUniform:
    """A kernel whose uniform holds its type's (`real`) mantissa bits, JAX's and Philox's: 23 in
    float32, its law pushed over the whole lattice; 52 in float64, its law held on cells."""

    real: type

    @property
    def bits(self) -> int:
        return 23 if self.real is np.float32 else 52

    @property
    def enumeration(self) -> str:
        """How coarse-construction holds its law (`coarse_construction.construction_law`)."""
        return "whole" if self.real is np.float32 else "cells"


@dataclass(frozen=True)
class NumpyroSteps(MantissaUniform):
    """NumPyro's ``TruncatedNormal(loc, scale, low=, high=).sample`` in float32 or float64
    (``jax.enable_x64``), as its ``icdf`` writes it (``numpyro/distributions/truncated.py``),
    each jnp operation rounded on its own: u = max(tiny, j 2^-k + tiny) (k = 23, 52);
    two-sided, q = clip((1 - u) t_low + u t_high, tiny, 1 - eps) with t = Phi of the bound
    mirrored about loc (sign -1 when low > loc), then (1 - sign) loc + sign (loc + scale
    ndtri(q)); one-sided below (high = inf) the same without the clip, t_high 1 or 0; one-sided
    above, loc + scale ndtri(u Phi(high)). In float32 every step is XLA's (`xla_cpu`) and its
    law is pushed over the 2^23 lattice; in float64 ndtri is JAX's (`xla_cpu.ndtri64`), the two
    Phi of the ends go through scipy's erf and erfc in JAX's formula (XLA's float64 erf is not
    repeated: an ulp apart at most, 89-100 % of the values equal on the windows measured), and
    its law is held on cells of the 52-bit uniform (the last bits' shares estimated)."""

    fmt: object
    real: type
    loc: float
    scale: float
    sign: float
    tail_low: float
    tail_high: float
    kind: str  # "two-sided", "below" (low only) or "above" (high only)
    exact: ClassVar[bool] = True

    @classmethod
    def of(cls, law) -> NumpyroSteps | None:
        fmt, dist = law.fmt, law.dist
        a, b = float(dist.a), float(dist.b)
        if fmt.name not in ("float32", "float64") or not float(dist.scale) > 0 or (
                math.isinf(a) and math.isinf(b)):
            return None
        real = np.float32 if fmt.name == "float32" else np.float64
        f = xla_cpu.f32 if real is np.float32 else np.float64
        loc, scale = real(f(float(dist.loc))), real(f(float(dist.scale)))
        ndtr = xla_cpu.ndtr if real is np.float32 else xla_cpu.ndtr64

        def cdf(v):
            return real(ndtr(f((f(v) - loc) / scale))[()])

        if math.isinf(a):
            return cls(fmt, real, loc, scale, real(1.0), real(0.0), cdf(b), "above")
        low = real(f(a))
        sign = real(1.0 if loc >= low else -1.0)
        tail_low = cdf(loc - sign * (loc - low))
        if math.isinf(b):
            return cls(fmt, real, loc, scale, sign, tail_low,
                       real(1.0 if low <= loc else 0.0), "below")
        tail_high = cdf(loc - sign * (loc - real(f(b))))
        return cls(fmt, real, loc, scale, sign, tail_low, tail_high, "two-sided")

    def v_of(self, j) -> np.ndarray:
        """The probability q handed to ndtri for lattice points j."""
        real = self.real
        tiny = real(np.finfo(real).tiny)
        f = np.ldexp(np.asarray(j, dtype=np.float64), -self.bits)
        if real is np.float32:
            u = np.maximum(tiny, xla_cpu.fma(f, real(1.0), tiny))
        else:
            u = np.maximum(tiny, f + tiny)
        if self.kind == "above":
            return (u * self.tail_high).astype(real)
        q = ((real(1.0) - u) * self.tail_low + u * self.tail_high).astype(real)
        if self.kind == "two-sided":
            q = np.clip(q, tiny, real(1.0) - np.finfo(real).eps)
        return q

    def x_of(self, q) -> np.ndarray:
        real = self.real
        ndtri = xla_cpu.ndtri if real is np.float32 else xla_cpu.ndtri64
        icdf = (self.loc + (self.scale * ndtri(q)).astype(real)).astype(real)
        if self.kind == "above":
            return icdf.astype(np.float64)
        return ((real(1.0) - self.sign) * self.loc + self.sign * icdf).astype(real).astype(
            np.float64)

    def on_cells(self, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the output, its weight: 1) at uniforms c in [0, 1] (`coarse_construction.cell_law`)."""
        j = np.minimum(np.floor(np.asarray(c, dtype=np.float64) * 2.0 ** self.bits),
                       2.0 ** self.bits - 1)
        x = self.x_of(self.v_of(j))
        return x, np.ones(x.shape)


#: Paddle's Erfinv (``paddle/phi/kernels/funcs/truncated_normal.h``): the rational
#: approximations of its three ranges, lowest degree first.
PADDLE_ERFINV = {
    "central": ((1.1975323115670912564578e0, 4.7072688112383978012285e1,
                 6.9706266534389598238465e2, 4.8548868893843886794648e3,
                 1.6235862515167575384252e4, 2.3782041382114385731252e4,
                 1.1819493347062294404278e4, 8.8709406962545514830200e2),
                (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
                 2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
                 5.2264952788528545610e3)),
    "near": ((1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0,
              3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
              2.27238449892691845833e-2, 7.74545014278341407640e-4),
             (1.4142135623730950488016887e0, 2.9036514445419946173133295e0,
              2.3707661626024532365971225e0, 9.7547832001787427186894837e-1,
              2.0945065210512749128288442e-1, 2.1494160384252876777097297e-2,
              7.7441459065157709165577218e-4, 1.4859850019840355905497876e-9)),
    "far": ((6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0,
             2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
             2.71155556874348757815e-5, 2.01033439929228813265e-7),
            (1.414213562373095048801689e0, 8.482908416595164588112026e-1,
             1.936480946950659106176712e-1, 2.103693768272068968719679e-2,
             1.112800997078859844711555e-3, 2.611088405080593625138020e-5,
             2.010321207683943062279931e-7, 2.891024605872965461538222e-15)),
}


def paddle_erfinv(x: np.ndarray, mt) -> np.ndarray:
    """Paddle's ``Erfinv<MT>``, each statement as C++ evaluates it: the double literals (0.180625,
    0.25, 1.0, 1.6, 5.0) and ``log``/``sqrt`` of a double in double, assigned back to MT; the
    polynomials in MT, one rounding per operation (its CPU build contracts no multiply-add:
    measured, a fused variant writes other values on a third of the draws)."""
    x = np.asarray(x, dtype=mt)
    ax = np.abs(x)

    def horner(coefficients, r):
        p = np.full_like(r, mt(coefficients[-1]))
        for k in coefficients[-2::-1]:
            p = p * r + mt(k)
        return p

    with np.errstate(all="ignore"):
        wide = x.astype(np.float64)
        r = (0.180625 - 0.25 * wide * wide).astype(mt)
        num, den = PADDLE_ERFINV["central"]
        central = (x * horner(num, r)) / horner(den, r)
        ln2 = np.float64(mt(6.931471805599453094172321214581e-1))
        r = np.sqrt(ln2 - np.log(1.0 - ax.astype(np.float64))).astype(mt)
        near = r <= mt(5.0)
        r_near = (r.astype(np.float64) - 1.6).astype(mt)
        r_far = (r.astype(np.float64) - 5.0).astype(mt)
        tail = np.where(near, horner(PADDLE_ERFINV["near"][0], r_near)
                        / horner(PADDLE_ERFINV["near"][1], r_near),
                        horner(PADDLE_ERFINV["far"][0], r_far)
                        / horner(PADDLE_ERFINV["far"][1], r_far))
        # C++ compares the float with the double 0.85, not with float(0.85)
        out = np.where(ax.astype(np.float64) <= 0.85, central, np.where(x < 0, -tail, tail))
        return np.where(x == 1, np.inf, np.where(x == -1, -np.inf, out)).astype(mt)


class OnParameters:
    """A kernel built from a law's parameters: ``of(law)`` is ``on(fmt, mean, std, a, b)``."""

    @classmethod
    def of(cls, law):
        dist = law.dist
        return cls.on(law.fmt, float(dist.loc), float(dist.scale), float(dist.a), float(dist.b))


@dataclass(frozen=True)
class PaddleSteps(OnParameters):
    """Paddle's ``truncated_gaussian_random`` CPU kernel (``paddle.nn.init.trunc_normal_``): in
    MT (float32 for float32 and bfloat16 outputs, float64 for float64), mean, std, a and b
    arriving as float32; the uniform ``std::uniform_real_distribution<MT>(FLT_MIN, 1)`` on a
    64-bit Mersenne twister, i.e. c = RN_MT(g) 2^-64 for a 64-bit integer g (libstdc++'s
    generate_canonical), then FLT_MIN + c (1 - FLT_MIN); p = Phi(a) + (Phi(b) - Phi(a)) value,
    the Phi's from a double erf rounded into MT; ``sqrt(2.0) * Erfinv(2 p - 1) * std + mean`` in
    double, assigned to MT, clamped to [a, b] in MT, cast to the output. The lattice is the MT
    values of c, each weighted by its rounding cell of g (`midpoints`); coarse-construction
    enumerates the law over the MT values of p in the window."""

    fmt: object
    mt: type
    mean: float
    std: float
    a: float
    b: float
    lo: float
    hi: float
    span: float
    exact: ClassVar[bool] = True
    #: how coarse-construction enumerates it: over the MT values of p in [lo, hi]
    enumeration: ClassVar[str] = "window"

    @classmethod
    def on(cls, fmt, mean: float, std: float, a: float, b: float) -> PaddleSteps | None:
        """The kernel on TN(mean, std, a, b) written into `fmt` (None: a dtype its CPU kernel
        does not take, or a degenerate law)."""
        if fmt.name not in ("float32", "float64", "bfloat16"):
            return None
        mt = np.float64 if fmt.name == "float64" else np.float32
        mean, std, a, b = (float(np.float32(v)) for v in (mean, std, a, b))
        if not std > 0:
            return None

        def cdf(v):
            z = float(mt((mt(v) - mt(mean)) / mt(std)))
            return float(mt((1.0 + math.erf(z / math.sqrt(2.0))) / 2.0))

        with np.errstate(all="ignore"):
            lo, hi = cdf(a), cdf(b)
        if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
            return None
        return cls(fmt, mt, mean, std, a, b, lo, hi, float(mt(mt(hi) - mt(lo))))

    def c_of(self, keys) -> np.ndarray:
        """The uniform c of lattice keys (MT's bit patterns of the values in [0, 1))."""
        bits = np.uint64 if self.mt is np.float64 else np.uint32
        return np.asarray(keys).astype(bits).view(self.mt)

    def v_of(self, keys) -> np.ndarray:
        return self.v_at(self.c_of(keys))

    def v_at(self, c) -> np.ndarray:
        """p at uniforms c in [0, 1] (MT values; non-decreasing in c)."""
        mt, tiny = self.mt, self.mt(np.finfo(np.float32).tiny)
        value = np.asarray(c, dtype=mt) * (mt(1.0) - tiny) + tiny
        return (mt(self.lo) + mt(self.span) * value).astype(np.float64)

    def on_cells(self, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the output, its weight: 1) at uniforms c in [0, 1] (`coarse_construction.cell_law`)."""
        x = self.x_of(self.v_at(c))
        return x, np.ones(x.shape)

    def x_of(self, p, error: float = 0.0) -> np.ndarray:
        """The output value of p (`error` unused: the kernel is repeated exactly)."""
        mt = self.mt
        e = paddle_erfinv(mt(2.0) * np.asarray(p, dtype=mt) - mt(1.0), mt)
        with np.errstate(all="ignore"):
            ret = (math.sqrt(2.0) * e.astype(np.float64) * self.std + self.mean).astype(mt)
            ret = np.clip(ret, mt(self.a), mt(self.b))
        return self.fmt.round(ret.astype(np.float64))

    @property
    def window_format(self):
        """The format of p: MT's."""
        return float_format("float64" if self.mt is np.float64 else "float32")

    @property
    def top(self) -> int:
        """The lattice key of 1.0 (the keys of c run below it)."""
        return int(np.array([1.0], dtype=self.mt).view(
            np.uint64 if self.mt is np.float64 else np.uint32)[0])

    def midpoints(self, keys: np.ndarray) -> np.ndarray:
        """The cumulative mass of c below each key: the midpoint between the key's value and
        the one before (0 at key 0, 1 from the top key on: the top key's cell also holds the g
        that round to 2^64, written as the value below 1)."""
        keys, top = np.asarray(keys, dtype=np.int64), self.top
        inside = (keys > 0) & (keys < top)
        out = np.where(keys >= top, 1.0, 0.0)
        k = keys[inside]
        here = self.c_of(k).astype(np.float64)
        below = self.c_of(k - 1).astype(np.float64)
        # exact for float32's c; for float64's within 2^-54, small beside the cells an
        # enumerable (narrow) window of p gathers into each of its values
        out[inside] = below + (here - below) / 2.0
        return out


#: Standard deviations inside the bounds from which TensorFlow's kernel draws normals instead.
TF_RANDN_FROM = 1.3


@dataclass(frozen=True)
class TensorflowSteps(OnParameters, MantissaUniform):
    """TensorFlow's ``parameterized_truncated_normal`` CPU kernel (``stateless_`` too;
    ``parameterized_truncated_normal_op.cc``) in float32 or float64, every step in that type T:
    bounds in sigma units ``(bound - mean) / stddev`` (mirrored where the window lies below the
    mean); its uniforms u = k 2^-23 (float32: Philox's 23 mantissa bits) or k 2^-52 (float64);
    on a narrow window (``diff < cutoff``) z = u diff + normMin, kept with probability
    exp((plus - z^2) / 2) against a second uniform; in a tail, Robert's exponential proposals
    z = -log(u) / alpha + normMin, kept with probability exp(-(alpha - z)^2 / 2) and
    z < normMax; then z stddev + mean. Its log is the C library's (scalar ``Eigen::numext``
    calls; `harness.diagnosis.library_ops.libm`). The normal branch (Box-Muller; windows reaching
    1.3 sigma past the mean) is not repeated (None). In float32 its law is pushed over the 2^23
    proposals, each weighted by the share of the second uniform's lattice that keeps it; in
    float64 it is held on cells of the uniform, one proposal drawn in each."""

    fmt: object
    real: type
    mean: float
    stddev: float
    low: float  # normMin
    high: float  # normMax
    branch: str  # "uniform" or "exponential"
    exact: ClassVar[bool] = True

    @classmethod
    def on(cls, fmt, mean: float, std: float, a: float, b: float) -> TensorflowSteps | None:
        """The kernel on TN(mean, std, a, b) written into `fmt` (None: not float32 or float64,
        the normal branch, or arguments the kernel refuses)."""
        if fmt.name not in ("float32", "float64"):
            return None
        f = np.float32 if fmt.name == "float32" else np.float64
        mean, stddev, lo, hi = f(mean), f(std), f(a), f(b)
        if not (stddev > 0 and lo < hi) or not (np.isfinite(lo) or np.isfinite(hi)):
            return None
        if (np.isinf(lo) and lo < 0) or hi < mean:
            lo, hi, stddev = hi, lo, -stddev
        with np.errstate(all="ignore"):
            low, high = f((lo - mean) / stddev), f((hi - mean) / stddev)
            root = np.sqrt(f(low * low) + f(4.0), dtype=f)
            exponent = f(f(0.5) + f(f(low * f(low - root)) / f(4.0)))
            grow = libm.expf(exponent)[()] if f is np.float32 else f(np.exp(exponent))
            cutoff = f(f(f(2.0) * grow) / f(low + root))
            diff = f(high - low)
        if (low < -TF_RANDN_FROM and high >= 0) or (high > TF_RANDN_FROM and low <= 0):
            return None
        branch = "uniform" if diff < cutoff else "exponential"
        return cls(fmt, f, mean, stddev, low, high, branch)

    def proposals(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(z in T, and the share of the second uniform's 2^bits values that keep it) of
        proposals k (integers 0 <= k < 2^bits, as int64 or float64). The acceptance g is taken
        in float64 from its argument in T: the share floor(g 2^bits) + 1 moves by one value
        where T's exp would round across it."""
        f, top = self.real, 2.0 ** self.bits
        u = (np.asarray(k, dtype=np.float64) / top).astype(f)
        log = libm.logf if f is np.float32 else libm.log
        with np.errstate(all="ignore"):
            if self.branch == "uniform":
                z = ((u * f(self.high - self.low)).astype(f) + self.low).astype(f)
                plus = f(0.0) if self.low < 0 else f(self.low * self.low)
                keep = np.exp(((plus - (z * z).astype(f)) / f(2.0)).astype(f).astype(np.float64))
                inside = np.ones(z.shape, dtype=bool)
            else:
                alpha = f((self.low + np.sqrt(f(self.low * self.low) + f(4.0), dtype=f)) / f(2.0))
                z = ((-log(u) / alpha).astype(f) + self.low).astype(f)
                x = (alpha - z).astype(f) if self.low < alpha else np.full_like(z, self.low - alpha)
                keep = np.exp((-(x * x).astype(f) / f(2.0)).astype(f).astype(np.float64))
                inside = z < self.high
        # the second uniform m 2^-bits keeps z where m 2^-bits <= g
        share = np.minimum(np.floor(keep * top) + 1.0, top) / top
        share = np.where(inside & np.isfinite(z), share, 0.0)
        return z, share

    def outputs(self, z: np.ndarray) -> np.ndarray:
        """z stddev + mean in T, as float64."""
        f = self.real
        with np.errstate(all="ignore"):
            return ((z * self.stddev).astype(f) + self.mean).astype(f).astype(np.float64)

    def on_cells(self, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(the output, the chance it is kept) of the proposal at uniforms c in [0, 1]."""
        k = np.floor(np.asarray(c, dtype=np.float64) * 2.0 ** self.bits)
        z, share = self.proposals(k)
        return self.outputs(z), share
