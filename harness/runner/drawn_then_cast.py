"""A sampler as a model calls it when the parameter holds a cast of what the sampler wrote.

A model that initializes a float32 copy and casts it into its bfloat16 parameter (``w =
p.float()``, init, ``p.copy_(w)``; or a model initialized in float32 and then ``.to(bfloat16)``)
hands its training a cast of the sampler's float32 output: that cast is what is judged, against
the rounded law of the parameter's dtype. `DrawnCandidate` is the candidate called that way: it
fills a temporary of the dtype the sampler wrote (`Case.drawn_in`), then copies it into the
tensor, rounding once more. A wrapper around the candidate, like an execution path, never a second
engine; every other attribute is the candidate's own.
"""

from __future__ import annotations

import torch

from reference.dtypes import DTYPES


class DrawnCandidate:
    """`candidate` writing into a temporary of dtype `drawn_in`, cast into the tensor."""

    def __init__(self, candidate, drawn_in: str):
        self._candidate = candidate
        self.drawn_in = drawn_in
        self._dtype = DTYPES[drawn_in]

    def __getattr__(self, name):
        return getattr(self._candidate, name)

    def __call__(self, tensor, mean, std, a, b, generator=None):
        drawn = torch.empty(tuple(tensor.shape), dtype=self._dtype, device=tensor.device)
        self._candidate(drawn, mean, std, a, b, generator)
        with torch.no_grad():
            tensor.copy_(drawn)
        return tensor

    def __repr__(self) -> str:
        return f"DrawnCandidate({self._candidate!r}, {self.drawn_in!r})"


def as_drawn(candidate, drawn_in: str):
    """The candidate as the case draws it (itself where the case is drawn in its own dtype)."""
    return DrawnCandidate(candidate, drawn_in) if drawn_in else candidate
