"""The case grid and the sample-size profiles.

A Case is what a candidate is asked to do: fill a tensor of `shape` with TN(mean, std, a, b) in
absolute bounds (torch.nn.init convention). Ids are stable: reports are compared across runs by id,
so never rename one; add new cases instead.

Profiles set the number of samples per (case, dtype, device) and per stage; stage 2 of a
statistical check draws `STAGE2_FACTOR` times as many on a fresh seed. The n is fixed by the
profile and the case before anything is drawn, never by how fast the machine is: the same seed
gives the same rows on a busy machine, a slow one and a fast one. A wall-clock budget exists only
as an explicit option (``--case-budget``, ``--budget-seconds``), and its rows say so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

INF = math.inf
#: The tag of a case whose draw is slow for the samplers people use (torch's rejection loop takes
#: seconds per call on [10, 1000]): the smoke and pr profiles draw it with `Profile.slow_draw_n`.
SLOW_DRAW = "slow-draw"


@dataclass(frozen=True)
class Case:
    id: str
    mean: float
    std: float
    a: float
    b: float
    shape: tuple
    tags: tuple = ()
    why: str = ""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def as_dict(self) -> dict:
        return {"case": self.id, "mean": self.mean, "std": self.std, "a": self.a, "b": self.b,
                "shape": "x".join(map(str, self.shape)) or "scalar"}


GRID: tuple[Case, ...] = (
    Case("normal-2sigma", 0.0, 1.0, -2.0, 2.0, (256, 256), ("symmetric",),
         "the textbook case: N(0,1) on +-2 sigma; output std 0.8796 sigma"),
    Case("abs-bounds-trap", 0.0, 0.02, -2.0, 2.0, (10, 500), ("far-bounds", "init"),
         "torch's default bounds +-2 with std 0.02: bounds at +-100 sigma (the bf16 bug report)"),
    Case("vit-pos-embed", 0.0, 0.02, -0.04, 0.04, (1, 144, 64), ("init",),
         "ViT positional embedding truncated at +-2 sigma"),
    Case("half-normal", 0.0, 1.0, 0.0, INF, (256, 256), ("one-sided",),
         "[0, inf): a bound at the mode, the other infinite"),
    Case("tail-5", 0.0, 1.0, 5.0, INF, (256, 256), ("one-sided", "tail"),
         "[5, inf): mass 2.9e-7 of the normal; rejection from N(0,1) never ends"),
    Case("deep-window-10-1000", 0.0, 1.0, 10.0, 1000.0, (256, 256), ("tail", SLOW_DRAW),
         "[10, 1000]: mass 7.6e-24; only tail-aware samplers survive"),
    Case("asym-window-1-3", 0.0, 1.0, 1.0, 3.0, (256, 256), ("asymmetric",),
         "[1, 3]: density falls by 55x across the window"),
    Case("narrow-window-8", 0.0, 1.0, 8.0, 8.01, (256, 256), ("narrow", "tail"),
         "[8, 8.01]: a narrow window deep in the tail"),
    Case("sub-ulp-window", 0.0, 1.0, 0.3, 0.30001, (256, 256), ("narrow",),
         "[0.3, 0.30001]: narrower than one bf16/fp16 ulp"),
    Case("mean-outside-3-4", 0.0, 1.0, 3.0, 4.0, (256, 256), ("tail",),
         "mean 0 outside [3, 4]"),
    Case("untruncated", 0.0, 1.0, -INF, INF, (256, 256), ("infinite",),
         "(-inf, inf): must be plain N(0,1)"),
    Case("tiny-std", 0.5, 1e-6, 0.5 - 2e-6, 0.5 + 2e-6, (256, 256), ("lattice",),
         "std 1e-6 at mean 0.5: the lattice of every dtype but float64 is coarse next to sigma"),
    Case("huge-std", 0.0, 1e3, -1.0, 1.0, (256, 256), ("flat",),
         "std 1e3 on [-1, 1]: nearly uniform"),
    Case("large-mean", 100.0, 1.0, 98.0, 102.0, (256, 256), ("lattice",),
         "mean 100, sigma 1 on [98, 102]: bf16's lattice (0.5) is coarser than sigma/2"),
)

_BY_ID = {c.id: c for c in GRID}
assert len(_BY_ID) == len(GRID), "case ids must be unique"


def case_by_id(case_id: str) -> Case:
    try:
        return _BY_ID[case_id]
    except KeyError:
        raise KeyError(f"unknown case {case_id!r}; known: {', '.join(_BY_ID)}") from None


#: The `sharded` selection: the cases and dtypes a sharded run (world size > 1) draws unless
#: --cases / --dtypes say otherwise: the initializers of large models (std 0.02 in bf16, the
#: absolute-bounds trap, a ViT embedding whose one row leaves ranks empty) and the textbook case.
SHARDED_CASES = ("normal-2sigma", "abs-bounds-trap", "vit-pos-embed")
SHARDED_DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class Profile:
    name: str
    n: int  # samples per (case, dtype, device) at stage 1
    note: str = ""
    min_calls: int = 2  # at least this many candidate calls (successive-call independence)
    n_cuda: int | None = None  # stage-1 samples on a CUDA device, where it differs from n
    # Stage-1 samples of a SLOW_DRAW case (None: the profile's n); fixed, like n.
    slow_draw_n: int | None = None
    # World sizes run by default (--world-sizes): 1 is the unsharded grid; W > 1 runs the sharded
    # selection (SHARDED_CASES x SHARDED_DTYPES) on W ranks (harness.distributed).
    world_sizes: tuple = (1,)

    def samples(self, device: str = "cpu", case: "Case | None" = None) -> int:
        """Stage-1 samples for `case` on `device` (a function of the profile and the case only)."""
        if case is not None and SLOW_DRAW in case.tags and self.slow_draw_n is not None:
            return self.slow_draw_n
        if self.n_cuda is not None and str(device).startswith("cuda"):
            return self.n_cuda
        return self.n


PROFILES = {
    "smoke": Profile("smoke", 1 << 16, "self-tests: seconds for the whole grid"),
    "pr": Profile("pr", 1 << 22, "the default: the whole grid for one candidate in minutes on 2 cores",
                  slow_draw_n=1 << 18),
    "nightly": Profile("nightly", 1 << 27, "long CPU runs and GPUs (2^30 there); rates down to "
                       "~1e-8 per element; no budget; the sharded selection on 2 and 4 ranks",
                       n_cuda=1 << 30, world_sizes=(1, 2, 4)),
}

STAGE2_FACTOR = 4
MAX_CHUNK_ELEMENTS = 1 << 24
