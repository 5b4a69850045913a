"""torch's float32 ``uniform_`` and ``erfinv`` as its CPU kernels compute them, so that the
diagnosis can push the exact law of torch <= 2.11's inverse CDF (and timm's copy of it, which
draws ``uniform_(2l - 1, 2u - 1)``, then ``erfinv_``) through its whole 2^24-point lattice.

``uniform_(from, to)`` in float32 draws a 32-bit word w, takes x = (w & (2^24 - 1)) 2^-24 and
writes ``x (to - from) + from`` in float32, a value equal to ``to`` replaced by ``from``. Where
torch's CPU kernels are compiled for AVX2 or AVX-512 (or on ARM) the compiler fuses that line
into one fused multiply-add, one rounding instead of two; on x86 without them it rounds twice.
Which one this torch does is measured, not assumed (`uniform_fused`): a short draw of torch's
generator is repeated with numpy's MT19937 (torch's CPU generator is the same Mersenne Twister,
seeded alike) both ways. The two lattices differ on about half the values of a wide window, and
with them the law's equal pairs and last bits.

torch's float32 erfinv is a rational start and two Newton steps through the C library's erff and
expf, which numpy does not repeat bit for bit (a float32 copy of the steps agrees on ~78 % of the
arguments). The diagnosis calls torch's own CPU kernel on the values of v instead: these are
models of a library's arithmetic for naming a mechanism (the candidate is still judged against
the reference's law alone), and the kernel they call is the one the construction names.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

F32 = np.float32
F64 = np.float64

#: Random bits of torch's float32 uniform (std::numeric_limits<float>::digits).
UNIFORM_BITS = 24
#: The probe's window and length: wide enough that the fused and the twice-rounded lattices
#: differ on about half the draws.
PROBE_WINDOW = (-0.9544997361036416, 0.9544997361036416)
PROBE_DRAWS = 4096


def uniform_image(j, lo: float, hi: float, fused: bool, wrapped: bool = True) -> np.ndarray:
    """torch's float32 ``uniform_(lo, hi)`` at lattice points j (0 <= j < 2^24), as float64;
    `wrapped`: ``hi`` written as ``lo`` (as torch writes it; otherwise the image is
    non-decreasing in j)."""
    x = np.ldexp(np.asarray(j, dtype=F64), -UNIFORM_BITS)  # exact in float32
    lo32, hi32 = F32(lo), F32(hi)
    span = F32(hi32 - lo32)
    if fused:
        # x span is exact in float64 (24 + 24 bits); the sum rounds twice only where the
        # float64 sum lands on a float32 tie (about 2^-29 of the points)
        v = (x * F64(span) + F64(lo32)).astype(F32)
    else:
        v = (x.astype(F32) * span).astype(F32) + lo32
    return (np.where(v == hi32, lo32, v) if wrapped else v).astype(F64)


def generator_words(seed: int, n: int) -> np.ndarray:
    """The first n 32-bit words (uint64) of torch's CPU generator seeded with `seed`: numpy's
    RandomState seeds its MT19937 by init_genrand(seed), as torch's does."""
    _, key, pos, *_ = np.random.RandomState(seed).get_state()
    words = np.random.MT19937()
    words.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": pos}}
    return words.random_raw(n).astype(np.uint64)


@functools.lru_cache(maxsize=None)
def uniform_fused() -> bool | None:
    """Whether this torch's CPU ``uniform_`` in float32 rounds once (fused) or twice; None where
    neither lattice repeats its draw (a generator this model does not know)."""
    seed = 20261205
    lo, hi = PROBE_WINDOW
    drawn = torch.empty(PROBE_DRAWS, dtype=torch.float32)
    drawn.uniform_(lo, hi, generator=torch.Generator().manual_seed(seed))
    j = generator_words(seed, PROBE_DRAWS) & np.uint64((1 << UNIFORM_BITS) - 1)
    written = drawn.numpy().astype(F64)
    for fused in (True, False):
        if np.array_equal(written, uniform_image(j.astype(np.int64), lo, hi, fused)):
            return fused
    return None


def erfinv(v) -> np.ndarray:
    """torch's float32 erfinv of float32 values v (its CPU kernel), as float64."""
    values = torch.from_numpy(np.ascontiguousarray(np.asarray(v, dtype=F32)))
    return torch.erfinv(values).numpy().astype(F64)
