"""The truth every verdict is measured against: the truncated-normal law (float64, log space), its
mpmath oracle (`reference.oracle`), dtype facts, and the rounded law RN(X) in each floating dtype."""

from .truncnorm import TruncatedNormal
from .dtypes import FloatFormat, float_format
from .rounded import RoundedLaw, rounded_law

__all__ = ["TruncatedNormal", "FloatFormat", "float_format", "RoundedLaw", "rounded_law"]
