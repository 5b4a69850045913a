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

import dataclasses
import hashlib
import math
from dataclasses import dataclass

from record.ids import CaseLabel, format_case_label, is_case_id, parse_case_label
from reference.dtypes import DEFAULT_DTYPE_NAMES

INF = math.inf
#: The tag of a case whose draw is slow for the samplers people use (torch's rejection loop takes
#: seconds per call on [10, 1000]): the pr profile draws it with `Profile.slow_draw_n` at both
#: stages.
SLOW_DRAW = "slow-draw"


@dataclass(frozen=True)
class ModelCall:
    """Where a case recorded from a model comes from (`harness.model_calls`): the model function,
    the sampler function that made the call as the model report names it, how many calls were
    alike, and the parameters holding their values (qualified names; empty when unknown)."""

    model: str
    function: str
    calls: int
    parameters: tuple = ()


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
    # How the tensor the candidate fills is made (`harness.engine.bits.make_target`): "" (a new
    # contiguous tensor), "channels_last", or a view of a bigger base tensor ("transposed",
    # "stepped", "column-block"); `shape_class` names the shape axis entry ("" for the grid's).
    view: str = ""
    shape_class: str = ""
    # The execution path (`PATHS`, harness.runner.paths): "eager", or how else it is called.
    path: str = "eager"
    # A case given as data (`--case`, a model's recorded call, the explorer): the spec that
    # rebuilds it (its reproduce lines carry it), the dtypes it is judged in (empty: the run's),
    # whether its shape is its own (no shape axis), and a stricter alpha_fail where a family of
    # cases holds a stated family-wise false-alarm rate (the explorer).
    spec: str = ""
    dtypes: tuple = ()
    own_shape: bool = False
    alpha_fail: float | None = None
    # A model's recorded call: the candidate spec of the function that made it (what judges it
    # unless --candidate says otherwise), the dtype it was drawn in where the parameter holds a
    # cast of it ("" when drawn in the dtype judged), and where it comes from.
    sampler: str = ""
    drawn_in: str = ""
    origin: ModelCall | None = None
    # A case drawn at a shape class or on a path (`shaped`, `on_path`): the id of the case it is
    # drawn from ("": this case is its own).
    base: str = ""

    @property
    def label(self) -> CaseLabel:
        """The case's id, shape class and path as a group names them (`record.ids`)."""
        return CaseLabel(self.base or self.id, self.shape_class, self.path)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def shape_text(self) -> str:
        return "x".join(map(str, self.shape)) or "scalar"

    @property
    def alpha(self) -> float:
        """The standardized lower bound (a - mean) / std."""
        return (self.a - self.mean) / self.std

    @property
    def beta(self) -> float:
        """The standardized upper bound (b - mean) / std."""
        return (self.b - self.mean) / self.std

    def as_dict(self) -> dict:
        return {"case": self.id, "mean": self.mean, "std": self.std, "a": self.a, "b": self.b,
                "shape": self.shape_text}


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

# ------------------------------------------------------------------------------------------------
# Cases as data: `--case "mean=0,std=0.02,a=-0.04,b=0.04,shape=151936x4096,id=embed"`

#: The keys a case spec takes (``drawn``: the dtype the sampler writes before the cast to the
#: dtype judged, as a model that initializes a float32 copy and casts it does).
SPEC_KEYS = ("mean", "std", "a", "b", "shape", "id", "drawn")
#: The dtypes ``drawn=`` takes: the float dtypes a run covers by default.
DRAWN_DTYPES = DEFAULT_DTYPE_NAMES
#: The shape of a case given without one (the grid's), which also gets the shape axis.
DEFAULT_SHAPE = (256, 256)


class CaseSpecError(ValueError):
    """A case spec that defines no case; str() is one line naming the spec and the problem."""


def _spec_number(spec: str, key: str, text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise CaseSpecError(f"{spec!r}: {key}={text!r} is not a number") from None
    if math.isnan(value):
        raise CaseSpecError(f"{spec!r}: {key} is NaN")
    return value


def format_number(x: float) -> str:
    """A float as a spec writes it: shortest round trip, inf as inf."""
    return "inf" if x == math.inf else "-inf" if x == -math.inf else repr(float(x))


def case_spec(mean: float, std: float, a: float, b: float, shape: tuple | None = None,
              case_id: str | None = None, drawn_in: str = "") -> str:
    """The spec text of a case (numbers that round-trip exactly)."""
    parts = [f"mean={format_number(mean)}", f"std={format_number(std)}", f"a={format_number(a)}",
             f"b={format_number(b)}"]
    if shape is not None:
        parts.append("shape=" + ("x".join(map(str, shape)) or "scalar"))
    if case_id:
        parts.append(f"id={case_id}")
    if drawn_in:
        parts.append(f"drawn={drawn_in}")
    return ",".join(parts)


def parse_case_spec(spec: str, tags: tuple = ("custom",)) -> Case:
    """The Case of a spec ``mean=M,std=S,a=A,b=B[,shape=RxC][,id=NAME]`` (bounds may be ±inf;
    mean defaults to 0). Without a shape it takes the grid's (256x256) and the shape axis; its
    id defaults to one derived from the parameters, so the same spec gets the same seeds.
    CaseSpecError (one line) for a spec that defines no truncated normal."""
    fields: dict = {}
    for part in str(spec).split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or "=" in value:
            raise CaseSpecError(f"{spec!r}: {part.strip()!r} is not key=value (fields are "
                                f"separated by ',')")
        if key not in SPEC_KEYS:
            raise CaseSpecError(f"{spec!r}: unknown key {key!r}; known: {', '.join(SPEC_KEYS)}")
        if key in fields:
            raise CaseSpecError(f"{spec!r}: {key} given twice")
        fields[key] = value.strip()
    for key in ("std", "a", "b"):
        if key not in fields:
            raise CaseSpecError(f"{spec!r}: {key}= is missing")
    mean = _spec_number(spec, "mean", fields.get("mean", "0"))
    std, a, b = (_spec_number(spec, k, fields[k]) for k in ("std", "a", "b"))
    if not math.isfinite(mean):
        raise CaseSpecError(f"{spec!r}: mean must be finite, got {mean}")
    if not (math.isfinite(std) and std > 0):
        raise CaseSpecError(f"{spec!r}: std must be finite and > 0, got {std}")
    if a > b:
        raise CaseSpecError(f"{spec!r}: a > b ({a} > {b})")
    if a == b:
        raise CaseSpecError(f"{spec!r}: a == b == {a} is a point, not a window (the arguments "
                            "check asks every candidate to fill it with RN(a))")
    shape, own = DEFAULT_SHAPE, "shape" in fields
    if own:
        text = fields["shape"].lower()
        try:
            shape = () if text == "scalar" else tuple(int(d) for d in text.split("x"))
        except ValueError:
            raise CaseSpecError(f"{spec!r}: shape={fields['shape']!r} is not like 151936x4096") from None
        if any(d <= 0 for d in shape):
            raise CaseSpecError(f"{spec!r}: shape={fields['shape']!r} has a dimension < 1")
    drawn_in = fields.get("drawn", "")
    if drawn_in and drawn_in not in DRAWN_DTYPES:
        raise CaseSpecError(f"{spec!r}: drawn={drawn_in!r} is not one of {', '.join(DRAWN_DTYPES)}")
    case_id = fields.get("id") or "case-" + hashlib.blake2b(
        case_spec(mean, std, a, b, shape if own else None, drawn_in=drawn_in).encode(),
        digest_size=4).hexdigest()
    if not is_case_id(case_id):
        # A ':', '+' or '@' would read as a shape class, a path or a layout in the case's label.
        raise CaseSpecError(f"{spec!r}: id {case_id!r} may hold letters, digits, '_', '.', '-' only")
    if case_id in _BY_ID:
        raise CaseSpecError(f"{spec!r}: id {case_id!r} is a grid case's")
    return Case(case_id, mean, std, a, b, tuple(shape), tuple(tags), f"--case {spec}",
                spec=case_spec(mean, std, a, b, shape if own else None, case_id, drawn_in),
                own_shape=own, drawn_in=drawn_in)


def case_by_id(case_id: str) -> Case:
    try:
        return _BY_ID[case_id]
    except KeyError:
        raise KeyError(f"unknown case {case_id!r}; known: {', '.join(_BY_ID)}") from None


# ------------------------------------------------------------------------------------------------
# The shape axis: the tensors real models initialize. Kernels dispatch on size, layout and path
# (vector width and its remainder loop, a small-tensor fast path, int32 indexing past 2^31, a
# counter offset per call): a case drawn at one shape never meets them. The law does not depend on
# the shape, so each shape's output is judged against the case's rounded law.


@dataclass(frozen=True)
class ShapeClass:
    """One entry of the shape axis: a name (part of the case label, ``case:name``), the shape the
    candidate sees, how the tensor is made (`Case.view`), and a kind that says why it is there."""

    name: str
    shape: tuple
    kind: str  # "tiny", "model", "conv", "view", "big"
    view: str = ""
    why: str = ""
    cuda_only: bool = False
    dtypes: tuple = ()  # only these dtypes ("": all)


SHAPES: tuple[ShapeClass, ...] = (
    ShapeClass("1", (1,), "tiny", why="one element: a bias of one, the smallest call"),
    ShapeClass("7", (7,), "tiny", why="7 elements: below every vector width"),
    ShapeClass("3x5x5", (3, 5, 5), "tiny", why="75 elements, odd in every dim"),
    ShapeClass("61x67", (61, 67), "tiny", why="prime by prime: 4087 elements, no vector width divides it"),
    ShapeClass("768", (768,), "model", why="a bias or LayerNorm weight of a 768-wide model"),
    ShapeClass("4096", (4096,), "model", why="a bias of a 4096-wide model"),
    ShapeClass("1x1x768", (1, 1, 768), "model", why="ViT's cls_token"),
    ShapeClass("1x197x768", (1, 197, 768), "model", why="ViT-B/16's pos_embed"),
    ShapeClass("64x3x7x7", (64, 3, 7, 7), "conv", why="a ResNet stem conv kernel"),
    ShapeClass("64x3x7x7-cl", (64, 3, 7, 7), "conv", view="channels_last",
               why="the same kernel in channels_last"),
    ShapeClass("transposed", (384, 256), "view", view="transposed",
               why="the transpose of a 256x384 weight (a non-contiguous view)"),
    ShapeClass("stepped", (256, 256), "view", view="stepped",
               why="every other column of a 256x512 tensor, [:, ::2]"),
    ShapeClass("column-block", (256, 256), "view", view="column-block",
               why="columns 256..511 of a 256x1024 weight (a tensor-parallel block)"),
    ShapeClass("2^24", (4096, 4096), "big", why="one tensor of 2^24 elements per call"),
    ShapeClass("2^28", (16384, 16384), "big", why="2^28 elements per call (nightly)"),
    ShapeClass("2^31+1", (2**31 + 1,), "big", cuda_only=True,
               why="past the int32 index boundary (CUDA, nightly, where memory allows)"),
    ShapeClass("151936x4096", (151936, 4096), "big", cuda_only=True, dtypes=("bfloat16",),
               why="the bf16 embedding of the bug report's model (CUDA, nightly)"),
)

#: Shape classes by name.
SHAPE_CLASSES = {s.name: s for s in SHAPES}
assert len(SHAPE_CLASSES) == len(SHAPES), "shape class names must be unique"


def shaped(case: Case, shape: ShapeClass) -> Case:
    """`case` drawn at `shape`: the same law, its own label (``case:shape``) and streams."""
    label = dataclasses.replace(case.label, shape=shape.name)
    return dataclasses.replace(case, id=format_case_label(label), base=label.case,
                               shape=tuple(shape.shape), view=shape.view, shape_class=shape.name,
                               tags=tuple(case.tags) + ("shape",))


#: Execution paths (harness.runner.paths): how the candidate is called.
PATHS = ("eager", "compile", "compile-fullgraph", "deterministic")
#: The paths that call the candidate through torch.compile (their groups are ``compiled``).
COMPILED_PATHS = ("compile", "compile-fullgraph")


def on_path(case: Case, path: str) -> Case:
    """`case` with the candidate called on `path`: its own label (``case+path``) and streams."""
    if path not in PATHS:
        raise KeyError(f"unknown path {path!r}; known: {', '.join(PATHS)}")
    if path == "eager":
        return case
    label = dataclasses.replace(case.label, path=path)
    return dataclasses.replace(case, id=format_case_label(label), base=label.case, path=path)


def case_by_label(label: str, cases: dict | None = None) -> Case:
    """The case a report's case label names: ``id``, ``id:shape`` (the shape axis), ``id+path``,
    ``id:shape+path``; `cases` (id -> Case) besides the grid. KeyError naming what is unknown."""
    try:
        parts = parse_case_label(label)
    except ValueError as exc:
        raise KeyError(str(exc)) from None
    if parts.layout:
        raise KeyError(f"{label!r} names a sharded group's case: name the case, and its layout "
                       f"with --world-sizes and --placements")
    case = (cases or {}).get(parts.case) or case_by_id(parts.case)
    if parts.shape:
        if parts.shape not in SHAPE_CLASSES:
            raise KeyError(f"unknown shape class {parts.shape!r} in {label!r}; known: "
                           f"{', '.join(SHAPE_CLASSES)}")
        case = shaped(case, SHAPE_CLASSES[parts.shape])
    return on_path(case, parts.path)


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
    # Samples of a SLOW_DRAW case at each stage (None: the profile's n, and STAGE2_FACTOR times it
    # at stage 2); fixed, like n. Stage 2 is not enlarged: a group whose calls each take seconds
    # then spends at most 2 x slow_draw_n / numel calls' time (8 at pr, ~100 s for torch's 16-bit
    # rejection loop) instead of 5x; the two-stage error control does not depend on stage 2's n.
    slow_draw_n: int | None = None
    # World sizes run by default (--world-sizes): 1 is the unsharded grid; W > 1 runs the sharded
    # selection (SHARDED_CASES x SHARDED_DTYPES) on W ranks (harness.sharded).
    world_sizes: tuple = (1,)
    # The shape axis: which cases carry it (None: every case), at which shape classes, and the
    # most calls one shape's stage 1 makes (tiny tensors reach n = calls x numel).
    shape_cases: tuple | None = ()
    shape_classes: tuple = ()
    shape_calls: int = 4096
    shape_n: int | None = None  # stage-1 samples of a shape-axis case (None: the profile's n)
    # The shape-axis cases drawn at the big shape classes too (None: every one of them).
    big_shape_cases: tuple | None = None
    # Execution paths run by default (--paths).
    paths: tuple = ("eager",)

    def samples(self, device: str = "cpu", case: "Case | None" = None) -> int:
        """Stage-1 samples for `case` on `device` (a function of the profile and the case only):
        a shape-axis case draws at most `shape_calls` calls (tiny tensors), a SLOW_DRAW case
        `slow_draw_n`, a CUDA device `n_cuda`."""
        if self.draws_slowly(case):
            return self.slow_draw_n
        n = self.n_cuda if self.n_cuda is not None and str(device).startswith("cuda") else self.n
        if case is not None and case.shape_class:
            n = min(self.shape_n or n, self.shape_calls * max(1, case.numel))
        return n

    def stage_samples(self, stage: int, device: str = "cpu", case: "Case | None" = None) -> int:
        """Samples asked for at `stage` (1 or 2): stage 2 draws STAGE2_FACTOR times stage 1,
        except a SLOW_DRAW case under `slow_draw_n`, which draws that many at both stages."""
        n = self.samples(device, case)
        return n if stage != 2 or self.draws_slowly(case) else STAGE2_FACTOR * n

    def draws_slowly(self, case: "Case | None") -> bool:
        """Whether `case` is a SLOW_DRAW case this profile draws at `slow_draw_n`."""
        return case is not None and SLOW_DRAW in case.tags and self.slow_draw_n is not None


#: The shape classes of every profile but the big ones.
EVERYDAY_SHAPES = tuple(s.name for s in SHAPES if s.kind != "big")
#: The cases that carry the shape axis at pr: the +-2 sigma init cases and the absolute-bounds trap.
PR_SHAPE_CASES = ("normal-2sigma", "vit-pos-embed", "abs-bounds-trap")
#: Where the big shapes are drawn at pr: one case (the trap, the model-init call), every dtype.
BIG_SHAPE_CASES_PR = ("abs-bounds-trap",)

PROFILES = {
    # smoke: the grid alone (the self-tests run it dozens of times); --shapes adds the axis, on
    # normal-2sigma, at most 64 calls per shape.
    "smoke": Profile("smoke", 1 << 16, "self-tests: seconds for the whole grid",
                     shape_cases=("normal-2sigma",), shape_classes=(), shape_calls=64),
    "pr": Profile("pr", 1 << 22, "the default: the whole grid for one candidate in minutes on 2 cores",
                  slow_draw_n=1 << 18, shape_cases=PR_SHAPE_CASES,
                  shape_classes=EVERYDAY_SHAPES + ("2^24",), shape_calls=4096, shape_n=1 << 20,
                  big_shape_cases=BIG_SHAPE_CASES_PR),
    "nightly": Profile("nightly", 1 << 27, "long CPU runs and GPUs (2^30 there); rates down to "
                       "~1e-8 per element; the sharded selection on 2 and 4 ranks; every case at "
                       "every shape; every execution path",
                       n_cuda=1 << 30, world_sizes=(1, 2, 4), shape_cases=None,
                       shape_classes=EVERYDAY_SHAPES + ("2^28", "2^31+1", "151936x4096"),
                       shape_calls=1 << 16, paths=PATHS),
}

def shape_classes_for(case_id: str, profile: Profile, on_cuda: bool, dtype: str | None = None,
                      names=None) -> list:
    """The shape classes a grid case is drawn at: `names` (--shapes) or the profile's selection
    for its cases; the CUDA-only classes only on CUDA, a dtype-bound one only in its dtype (dtype
    None: not filtered), the big ones only on the profile's `big_shape_cases` (unless named)."""
    if names is None:
        if profile.shape_cases is not None and case_id not in profile.shape_cases:
            return []
        names = profile.shape_classes
        big_cases = profile.big_shape_cases
    else:
        big_cases = None
    out = []
    for name in names:
        shape = SHAPE_CLASSES[name]
        if shape.cuda_only and not on_cuda:
            continue
        if dtype is not None and shape.dtypes and dtype not in shape.dtypes:
            continue
        if shape.kind == "big" and big_cases is not None and case_id not in big_cases:
            continue
        out.append(shape)
    return out


STAGE2_FACTOR = 4
