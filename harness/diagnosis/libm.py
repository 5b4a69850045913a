"""The C library's float32 ``logf`` and ``expf``, called element by element: what a library's
scalar kernel writes where its source calls ``std::log`` or ``std::exp`` of a float (MLX's
erfinv, TensorFlow's rejection samplers). numpy's float32 log is another implementation
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
def _function(name: str):
    library = ctypes.util.find_library("m")
    if library is None:
        return None
    fn = getattr(ctypes.CDLL(library), name)
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return fn


def _elementwise(name: str, fallback, x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64).astype(F32)
    fn = _function(name)
    if fn is None:
        with np.errstate(all="ignore"):
            return fallback(x.astype(np.float64)).astype(F32)
    return np.fromiter(map(fn, x.ravel().tolist()), dtype=F32, count=x.size).reshape(x.shape)


def logf(x) -> np.ndarray:
    """The C library's ``logf`` of each float32 in `x`."""
    return _elementwise("logf", np.log, x)


def expf(x) -> np.ndarray:
    """The C library's ``expf`` of each float32 in `x`."""
    return _elementwise("expf", np.exp, x)
