"""The candidate protocol: what a sampler under test is, and adapters for other calling conventions.

The protocol is torch.nn.init's::

    fn(tensor, mean, std, a, b, generator=None) -> tensor

in place, **absolute** bounds ``a <= x <= b`` (either may be infinite), returning the tensor it filled.
`Candidate` wraps such a function with what the harness needs to know about it:

========================  ==========================================================================
``name``                  how reports name it (the registered name, or the ``--candidate`` spec)
``spec``                  the string `candidates.resolve` turns back into this candidate; pickling a
                          Candidate pickles only this, so pytest-xdist workers resolve it themselves
``version``               installed package version, module ``__version__``, or sha256[:12] of the file
``dtypes``                torch dtypes it supports (default float64, float32, float16, bfloat16)
``devices``               device types it supports (default ``("cpu", "cuda")``)
``torch_init_semantics``  claims torch.nn.init semantics: meta tensors are a no-op, an
                          ``nn.Parameter`` with ``requires_grad`` is filled without autograd history
``accepts_generator``     its function takes a ``generator`` parameter (or ``**kwargs``)
``convention``            "torch", "sigma", "functional" or "functional-sigma" (how it was adapted)
``fn``                    the protocol-convention function actually called
``raw``                   the user's function before adaptation
``known_bad``/``defect``  built-ins that model a defect say so; ``caught_by`` names the checks
``caught_by``             that are expected to catch it (documentation for the power self-tests)
``expresses``             None (every (mean, std, a, b) can be asked for), or a function
                          ``expresses(mean, std, a, b) -> None | reason`` naming why a sampler cannot
                          be asked for those parameters (a fixed-±2σ library sampler, one without a
                          mean); the harness skips such cases with the reason instead of calling it
``unavailable``           None, or a one-line reason why it cannot run here at all (its library is
                          not installed: the reason names the package); every test is then skipped
``prepare``               None, or a zero-argument callable doing one-time start-up (import the
                          library, start its child process); the engine calls it before the timed
                          calls, so start-up is not candidate time and not spent out of a budget
========================  ==========================================================================

Calling a candidate, ``cand(tensor, mean, std, a, b, generator)``, calls its function and returns what
the function returned (the contract check compares it with the tensor; nothing here wraps the call in
``torch.no_grad`` because whether the candidate does so itself is part of what is tested).
**When the function takes no generator**, the harness's generator is honoured by seeding the global RNG
with ``torch.manual_seed(s)`` just before the call, where ``s`` is a fresh 63-bit seed drawn from the
generator (`draw_seed`): the generator advances and successive calls get different streams, as
they would from a function that takes the generator, and the same generator seed still
reproduces every call. The
global RNG state (of every device) changes as a side effect, so a generator check that watches the
global state must not count that against such a candidate.

Declaring what a user function supports
---------------------------------------
A file or module given to ``--candidate`` can declare its properties with the decorator::

    from candidates import candidate

    @candidate(dtypes=("float32", "bfloat16"), devices=("cuda",), convention="sigma",
               torch_init_semantics=False, name="my-init", version="1.2")
    def my_trunc_normal(tensor, mean, std, a_sigma, b_sigma, generator=None): ...

or, without importing this package, with plain attributes on the function (the decorator sets exactly
these): ``fn.harness_dtypes``, ``fn.harness_devices``, ``fn.harness_convention``,
``fn.harness_torch_init_semantics``, ``fn.harness_name``, ``fn.harness_version``,
``fn.harness_accepts_generator``, ``fn.harness_expresses``, ``fn.harness_thread_invariant`` (the
same bits whatever the torch thread count: the `threads` check holds it to that),
``fn.harness_sharding_invariant`` (on a
DTensor the whole tensor does not depend on the world size or placement: the `sharding` check
holds it to that). Dtypes may be torch dtypes or names ("float32", "bf16", "half", ...).
A module attribute that already is a `Candidate` is used as is.

Conventions (``convention=``):

* ``"torch"`` (default): the protocol itself.
* ``"sigma"``: ``fn(tensor, mean, std, a_sigma, b_sigma, generator=None)`` with bounds in units of std
  around mean, as JAX ``truncated_normal``, TF and timm's ``trunc_normal_tf_`` take them; see
  `sigma_bounds`.
* ``"functional"``: ``fn(shape, mean, std, a, b, *, dtype, device, generator) -> new tensor``; the result
  is copied into the tensor; see `functional`.
* ``"functional-sigma"``: both.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Iterable
from typing import Any

import torch

from reference.dtypes import DEFAULT_DTYPE_NAMES, dtype_name, torch_dtype

__all__ = [
    "Candidate",
    "DEFAULT_DTYPES",
    "DEFAULT_DEVICES",
    "CONVENTIONS",
    "candidate",
    "functional",
    "sigma_bounds",
    "adapt",
    "accepts_generator",
    "detect_accepts_generator",
    "normalize_dtypes",
    "normalize_devices",
]

DEFAULT_DTYPES: tuple[torch.dtype, ...] = tuple(torch_dtype(n) for n in DEFAULT_DTYPE_NAMES)
DEFAULT_DEVICES: tuple[str, ...] = ("cpu", "cuda")
CONVENTIONS = ("torch", "sigma", "functional", "functional-sigma")



def normalize_dtypes(dtypes: Iterable[Any] | None) -> tuple[torch.dtype, ...]:
    """Torch dtypes from dtypes or their names ("float32", "torch.bfloat16", "bf16", ...)."""
    if dtypes is None:
        return DEFAULT_DTYPES
    if isinstance(dtypes, (str, torch.dtype)):
        dtypes = (dtypes,)
    return tuple(dict.fromkeys(torch_dtype(d) for d in dtypes))


def normalize_devices(devices: Iterable[Any] | None) -> tuple[str, ...]:
    """Device *types* ("cpu", "cuda", ...) from strings or torch.device ("cuda:1" -> "cuda")."""
    if devices is None:
        return DEFAULT_DEVICES
    if isinstance(devices, (str, torch.device)):
        devices = (devices,)
    return tuple(dict.fromkeys(torch.device(d).type for d in devices))


def detect_accepts_generator(fn: Callable) -> bool:
    """True when ``fn`` can be called with ``generator=...``: a parameter of that name or ``**kwargs``.

    An explicit ``fn.harness_accepts_generator`` wins (adapters set it to what the wrapped function
    accepts). Callables whose signature cannot be read (some C builtins) count as not accepting it, so
    they are seeded through the global RNG, which works for any sampler that uses torch's RNG.
    """
    declared = getattr(fn, "harness_accepts_generator", None)
    if declared is not None:
        return bool(declared)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            return True
        if p.name == "generator" and p.kind is not p.POSITIONAL_ONLY:
            return True
    return False


accepts_generator = detect_accepts_generator


def candidate(
    fn: Callable | None = None,
    *,
    dtypes: Iterable[Any] | None = None,
    devices: Iterable[Any] | None = None,
    convention: str | None = None,
    torch_init_semantics: bool | None = None,
    name: str | None = None,
    version: str | None = None,
    accepts_generator: bool | None = None,
    expresses: Callable | None = None,
    sharding_invariant: bool | None = None,
    thread_invariant: bool | None = None,
):
    """Decorator declaring a user function's properties (see the module docstring).

    Usable bare (``@candidate``) or with arguments. Only sets ``harness_*`` attributes; the function
    itself is returned unchanged, so it stays usable (and importable by name) on its own.
    """

    def mark(f: Callable) -> Callable:
        if convention is not None and convention not in CONVENTIONS:
            raise ValueError(f"unknown convention {convention!r} (one of {', '.join(CONVENTIONS)})")
        for attr, value in (
            ("harness_dtypes", None if dtypes is None else normalize_dtypes(dtypes)),
            ("harness_devices", None if devices is None else normalize_devices(devices)),
            ("harness_convention", convention),
            ("harness_torch_init_semantics", torch_init_semantics),
            ("harness_name", name),
            ("harness_version", version),
            ("harness_accepts_generator", accepts_generator),
            ("harness_expresses", expresses),
            ("harness_sharding_invariant", sharding_invariant),
            ("harness_thread_invariant", thread_invariant),
        ):
            if value is not None:
                setattr(f, attr, value)
        return f

    return mark(fn) if fn is not None else mark


def _to_sigma(x: float, mean: float, std: float) -> float:
    """(x - mean) / std with IEEE semantics: std == 0 gives +-inf or NaN instead of
    ZeroDivisionError, so a bad-argument case reaches the candidate, whose reaction is what is tested."""
    x, mean, std = float(x), float(mean), float(std)
    try:
        return (x - mean) / std
    except ZeroDivisionError:
        d = x - mean
        return math.nan if d == 0 or math.isnan(d) else math.copysign(math.inf, d) * math.copysign(1.0, std)


def sigma_bounds(fn: Callable) -> Callable:
    """Adapt ``fn(tensor, mean, std, a_sigma, b_sigma, generator=None)`` (bounds in σ units around mean,
    the JAX/TF/timm ``trunc_normal_tf_`` convention) to the protocol's absolute bounds.

    Infinite bounds stay infinite. The generator is passed only if ``fn`` accepts one; otherwise the
    wrapper declares ``harness_accepts_generator = False`` and `Candidate` seeds the global RNG.
    """
    takes_gen = accepts_generator(fn)

    @functools.wraps(fn)
    def wrapper(tensor, mean, std, a, b, generator=None):
        a_s, b_s = _to_sigma(a, mean, std), _to_sigma(b, mean, std)
        if takes_gen:
            return fn(tensor, mean, std, a_s, b_s, generator=generator)
        return fn(tensor, mean, std, a_s, b_s)

    _carry_declarations(fn, wrapper, takes_gen)
    return wrapper


def functional(fn: Callable) -> Callable:
    """Adapt ``fn(shape, mean, std, a, b, *, dtype, device, generator) -> tensor`` to the protocol:
    the returned tensor is copied into the given one (under ``torch.no_grad``, so parameters record no
    history; the copy casts if ``fn`` returned another dtype, which the checks then see as rounding).
    ``generator`` is passed only if ``fn`` accepts it. Meta tensors: ``fn`` is asked for a meta result and
    the copy is a no-op.
    """
    takes_gen = accepts_generator(fn)

    @functools.wraps(fn)
    def wrapper(tensor, mean, std, a, b, generator=None):
        kw = {"dtype": tensor.dtype, "device": tensor.device}
        if takes_gen:
            kw["generator"] = generator
        out = fn(tuple(tensor.shape), mean, std, a, b, **kw)
        if not isinstance(out, torch.Tensor):
            raise TypeError(f"functional candidate returned {type(out).__name__}, not a tensor")
        with torch.no_grad():
            tensor.copy_(out)
        return tensor

    _carry_declarations(fn, wrapper, takes_gen)
    return wrapper


def _carry_declarations(fn: Callable, wrapper: Callable, takes_gen: bool) -> None:
    # functools.wraps copied fn.__dict__ (the harness_* declarations included); the wrapper's own
    # generator parameter must not be mistaken for the wrapped function's.
    wrapper.harness_accepts_generator = takes_gen
    wrapper.harness_convention = "torch"  # already adapted: never adapt twice
    wrapper.__wrapped_raw__ = getattr(fn, "__wrapped_raw__", fn)
    # inspect.signature follows __wrapped__; the wrapper's signature is the protocol's.
    del wrapper.__wrapped__


def adapt(fn: Callable, convention: str) -> Callable:
    """The protocol-convention function for ``fn`` declared with ``convention``."""
    if convention == "torch":
        return fn
    if convention == "sigma":
        return sigma_bounds(fn)
    if convention == "functional":
        return functional(fn)
    if convention == "functional-sigma":
        return sigma_bounds(functional(fn))
    raise ValueError(f"unknown convention {convention!r} (one of {', '.join(CONVENTIONS)})")


def draw_seed(generator: torch.Generator | None, bits: int = 63) -> int:
    """A fresh ``bits``-bit seed from the harness's generator (the global torch RNG without one).

    One draw per call: successive calls get different seeds and the generator advances, as it
    would under a torch sampler; a generator seeded alike gives the same sequence."""
    device = generator.device if generator is not None else "cpu"
    high = (1 << bits) - 1 if bits == 63 else 1 << bits
    return int(torch.randint(0, high, (), generator=generator, device=device, dtype=torch.int64))


class Candidate:
    """A sampler under test; see the module docstring for the attributes.

    Construct directly with keyword overrides, or let `candidates.resolve` build one from a spec.
    ``fn`` is adapted according to ``convention`` (default: the function's ``harness_convention``, else
    "torch"); every other property defaults to the function's ``harness_*`` declaration, then to the
    protocol defaults.
    """

    def __init__(
        self,
        fn: Callable,
        *,
        name: str | None = None,
        spec: str | None = None,
        version: str | None = None,
        dtypes: Iterable[Any] | None = None,
        devices: Iterable[Any] | None = None,
        torch_init_semantics: bool | None = None,
        convention: str | None = None,
        accepts_generator: bool | None = None,
        known_bad: bool = False,
        defect: str = "",
        caught_by: tuple[str, ...] = (),
        expresses: Callable | None = None,
        unavailable: str | None = None,
        prepare: Callable[[], Any] | None = None,
        sharding_invariant: bool | None = None,
        thread_invariant: bool | None = None,
    ):
        if not callable(fn):
            raise TypeError(f"candidate function must be callable, got {type(fn).__name__}")
        decl = lambda attr, value: value if value is not None else getattr(fn, f"harness_{attr}", None)  # noqa: E731
        self.raw = fn
        self.convention = decl("convention", convention) or "torch"
        self.fn = adapt(fn, self.convention)
        self.name = decl("name", name) or spec or getattr(fn, "__qualname__", None) or repr(fn)
        self.spec = spec
        self.version = str(decl("version", version) or "unknown")
        self.dtypes = normalize_dtypes(decl("dtypes", dtypes))
        self.devices = normalize_devices(decl("devices", devices))
        self.torch_init_semantics = bool(decl("torch_init_semantics", torch_init_semantics) or False)
        self.accepts_generator = (bool(accepts_generator) if accepts_generator is not None
                                  else detect_accepts_generator(self.fn))
        self.known_bad = bool(known_bad)
        # On a DTensor the whole tensor does not depend on the world size or placement (the
        # `sharding` check holds such a candidate to it, bit for bit).
        self.sharding_invariant = bool(decl("sharding_invariant", sharding_invariant) or False)
        # The same bits whatever torch's thread count (the `threads` check holds it to that).
        self.thread_invariant = bool(decl("thread_invariant", thread_invariant) or False)
        self.defect = defect
        self.caught_by = tuple(caught_by)
        self.expresses = decl("expresses", expresses)
        if self.expresses is not None and not callable(self.expresses):
            raise TypeError("expresses must be callable: expresses(mean, std, a, b) -> None | reason")
        self.unavailable = unavailable
        self.prepare = prepare
        # Set by `candidates.loader` on what it resolves: how to pickle by spec (a module-level
        # function that resolves it again) and the spec to resolve (absolute for a file).
        self.restore: Callable | None = None
        self.resolve_spec: str | None = None
        doc = inspect.getdoc(fn) or ""
        self.doc = doc.strip().splitlines()[0] if doc.strip() else ""

    def __call__(self, tensor: torch.Tensor, mean: float, std: float, a: float, b: float,
                 generator: torch.Generator | None = None):
        if self.accepts_generator:
            return self.fn(tensor, mean, std, a, b, generator=generator)
        if generator is not None:
            # The function cannot take the generator: honour it through the global RNG (this
            # changes the global RNG state of every device; documented in the module docstring).
            # A seed drawn from the generator, not its initial seed: reseeding with the same seed
            # before every call would make successive calls identical, a defect of the harness
            # that the independence check would blame on the candidate.
            torch.manual_seed(draw_seed(generator))
        return self.fn(tensor, mean, std, a, b)

    def supports(self, dtype: torch.dtype, device: str | torch.device) -> bool:
        return self.skip_reason(dtype, device) is None

    def cannot_express(self, mean: float, std: float, a: float, b: float) -> str | None:
        """None when the sampler can be asked for TN(mean, std, a, b), else the one-line reason."""
        if self.expresses is None:
            return None
        reason = self.expresses(mean, std, a, b)
        return None if reason is None else " ".join(str(reason).split())

    def skip_reason(self, dtype: torch.dtype, device: str | torch.device, case=None) -> str | None:
        """None when (dtype, device) — and the case, when given (anything with mean, std, a, b and
        an id) — is supported, else a one-line reason for a pytest skip."""
        if self.unavailable:
            return f"candidate {self.name}: {self.unavailable}"
        if case is not None:
            reason = self.cannot_express(case.mean, case.std, case.a, case.b)
            if reason is not None:
                return f"candidate {self.name} cannot express {getattr(case, 'id', 'this case')}: {reason}"
        if dtype not in self.dtypes:
            have = ", ".join(dtype_name(d) for d in self.dtypes)
            return f"candidate {self.name} does not support {dtype_name(dtype)} (supports {have})"
        dev = torch.device(device).type
        if dev not in self.devices:
            return f"candidate {self.name} does not support device {dev} (supports {', '.join(self.devices)})"
        return None

    def sharded_reason(self) -> str | None:
        """None when the sampler fills a sharded (DTensor) parameter in place, else the one-line
        reason it cannot: a functional sampler (a library's) returns a whole array of its own,
        which its adapter copies into a plain tensor only."""
        if self.convention.startswith("functional"):
            return (f"candidate {self.name} returns a whole array of its own ({self.convention} "
                    "convention): it cannot fill a sharded (DTensor) parameter")
        return None

    def describe(self) -> str:
        """One line for terminal headers: ``name version``."""
        return f"{self.name} {self.version}"

    def __reduce_ex__(self, protocol):
        if self.spec is not None and self.restore is not None:
            # Pickle by spec: the receiving process (an xdist worker) resolves it itself. A path spec
            # travels as its absolute form (set by the loader), so a worker in another cwd finds it.
            return (self.restore, (self.resolve_spec or self.spec, self.spec))
        return super().__reduce_ex__(protocol)

    def __repr__(self) -> str:
        return f"Candidate({self.name!r}, version={self.version!r}, spec={self.spec!r})"
