"""The C library's ``logf``, ``expf`` and ``log``, called element by element: what a library's
scalar kernel writes where its source calls ``std::log`` or ``std::exp`` of a float or a double
(MLX's erfinv, TensorFlow's rejection samplers, JAX's float64 log); and C's float64 ``fma``,
vectorized. numpy's float32 log is another implementation
(measured on [0.01, 1]: it differs from glibc's logf on ~1.5 % of arguments, and glibc's logf
from the correctly rounded log on ~0.7 %), so the models that need these bits call the C
library itself; where none can be loaded, the float64
function rounded to float32 stands in (the correctly rounded value, which the C functions
return on > 99 % of arguments).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import numpy as np

F32 = np.float32


@functools.lru_cache(maxsize=None)
def _function(name: str, real):
    library = ctypes.util.find_library("m")
    if library is None:
        return None
    c_type = ctypes.c_float if real is F32 else ctypes.c_double
    fn = getattr(ctypes.CDLL(library), name)
    fn.restype, fn.argtypes = c_type, [c_type]
    return fn


def _elementwise(name: str, real, fallback, x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64).astype(real)
    fn = _function(name, real)
    if fn is None:
        with np.errstate(all="ignore"):
            return fallback(x.astype(np.float64)).astype(real)
    return np.fromiter(map(fn, x.ravel().tolist()), dtype=real, count=x.size).reshape(x.shape)


def logf(x) -> np.ndarray:
    """The C library's ``logf`` of each float32 in `x`."""
    return _elementwise("logf", F32, np.log, x)


def expf(x) -> np.ndarray:
    """The C library's ``expf`` of each float32 in `x`."""
    return _elementwise("expf", F32, np.exp, x)


def log(x) -> np.ndarray:
    """The C library's ``log`` of each float64 in `x`."""
    return _elementwise("log", np.float64, np.log, x)


def fma(x, y, z) -> np.ndarray:
    """x y + z in float64 with (almost always) one rounding, as C's ``fma``: the product split
    exactly into p + e (Dekker), p + z into s + t (Knuth's two-sum), then s + (t + e); it differs
    from the correctly rounded result only where t + e itself rounds onto a tie of s's lattice."""
    split = 134217729.0  # 2^27 + 1
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    p = x * y
    cx, cy = split * x, split * y
    x_hi = cx - (cx - x)
    y_hi = cy - (cy - y)
    x_lo, y_lo = x - x_hi, y - y_hi
    e = ((x_hi * y_hi - p) + x_hi * y_lo + x_lo * y_hi) + x_lo * y_lo
    s = p + z
    bb = s - p
    t = (p - (s - bb)) + (z - bb)
    return s + (t + e)
