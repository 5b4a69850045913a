"""The truth every verdict is measured against: the truncated-normal law (float64, log space), its
mpmath oracle (`reference.oracle`), dtype facts (and the one table of dtype names), and the
rounded law RN(X) in each floating dtype.

May import: numpy, scipy, mpmath, torch (dtype facts); nothing of this project above it.
"""

from .truncnorm import TruncatedNormal
from .dtypes import (DEFAULT_DTYPE_NAMES, DTYPES, FloatFormat, dtype_name, float_format,
                     torch_dtype)
from .rounded import RoundedLaw, rounded_law

__all__ = ["TruncatedNormal", "FloatFormat", "float_format", "RoundedLaw", "rounded_law", "DTYPES",
           "DEFAULT_DTYPE_NAMES", "dtype_name", "torch_dtype"]
