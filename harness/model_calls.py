"""Cases from a model: `--cases-from module:fn` (or ``path/file.py:fn``) calls a function that
builds and initializes a model, records every truncated-normal call it makes, whoever makes it,
and turns the distinct calls into cases, so a sampler is judged on exactly the calls the model
makes, in the dtypes its parameters end up holding.

What is recorded (`RECORDED_FUNCTIONS`; each names the registered candidate that judges its calls):

* ``torch.nn.init.trunc_normal_`` (candidate ``torch``), also when a library reaches it through a
  reference it took at import (transformers keeps torch's init functions in a dict);
* timm's ``trunc_normal_`` (``timm``) and ``trunc_normal_tf_`` (``timm-tf``, bounds in σ units);
* ``keras.random.truncated_normal`` (``keras-<backend>``: bounds fixed at mean ± 2 stddev), which
  keras' ``TruncatedNormal`` initializer calls;
* ``jax.random.truncated_normal`` (``jax``: a standard normal on (lower, upper)) and the
  initializer ``jax.nn.initializers.truncated_normal`` returns (``jax-init``);
* any function named with ``--record module:fn`` (repeatable), judged as that spec: its convention
  is the one it declares (`candidates.candidate`), torch.nn.init's by default.

How: a profile function (`sys.setprofile`) watches every Python call while the model is built and
keeps those whose code is one of these functions; nothing is replaced, so a function the model
imported by name before the recording started is seen too, and a library that is not installed
(or not used) is never imported. A call made inside a recorded call (timm's ``trunc_normal_tf_``
calling its helper, a team's wrapper calling torch) belongs to the outer one: the function that
made the call is the outermost one recorded.

What the parameter finally holds: a sampler often writes a temporary (``w = p.float()``, init,
``p.copy_(w)``; a model initialized in float32 and then ``.to(bfloat16)``). A torch function mode
follows the values out of the call through casts, copies and ``.data`` assignments; when the
function returns an ``nn.Module``, each call is matched to the parameters and buffers that hold its
values at the end, and it is judged in *their* dtype, drawn the way the model drew it (in the
dtype the sampler wrote, then cast: `Case.drawn_in`). A call whose values no parameter holds (or
a function that returns no module) is judged in the dtype it was drawn in.

The function is called in every process of a run (each xdist worker records for itself), so it
must be deterministic, as model code is. A meta-device model is recorded without memory.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

from record.ids import CASE_ID_CHARS
from reference.dtypes import dtype_name

from .cases import Case, ModelCall, case_spec


class RecordingError(Exception):
    """The function could not be loaded or called; str() is one line."""


@dataclass(frozen=True)
class CallArguments:
    """One truncated-normal call in torch.nn.init's terms: absolute bounds, the tensor's shape and
    the dtype the sampler wrote."""

    shape: tuple
    dtype: str
    mean: float
    std: float
    a: float
    b: float


# A reader turns a recorded frame's arguments (its locals at the call) and the call's return
# value into CallArguments, or None for a call it cannot express (array-valued bounds).
Reader = Callable[[dict, object], "CallArguments | None"]


@dataclass(frozen=True)
class RecordedFunction:
    """A function whose calls are recorded: where its code lives, who judges it, how to read it."""

    sampler: str  # the candidate spec its calls are judged with ("torch", "timm", a user's spec)
    label: str  # how the model report names the function
    files: tuple  # its code's file ends with one of these (() for a user's function: matched by
    # its code object)
    qualname: str
    read: Reader
    tensor_argument: str | None = None  # the filled tensor's parameter name; None: the return value


def _scalar(value) -> float | None:
    """A Python float from a number or a 0-d array; None for anything else."""
    try:
        if hasattr(value, "shape") and tuple(value.shape) != ():
            return None
        return float(value)
    except (TypeError, ValueError):
        return None


def _dtype_text(value) -> str | None:
    """'bfloat16', 'float32', ... from a torch, numpy, jax or keras dtype (or its name)."""
    if value is None:
        return None
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    text = str(getattr(value, "name", value)).rsplit(".", 1)[-1]
    return text or None


def _absolute(locals_: dict, tensor, names: tuple, sigma: bool) -> CallArguments | None:
    """CallArguments of a call in torch.nn.init's convention (or σ-unit bounds when `sigma`)."""
    if not isinstance(tensor, torch.Tensor):
        return None
    values = [_scalar(locals_.get(n)) for n in names]
    if any(v is None for v in values):
        return None
    mean, std, a, b = values
    if sigma:
        a, b = mean + a * std, mean + b * std
    return CallArguments(tuple(int(d) for d in tensor.shape), dtype_name(tensor.dtype), mean, std,
                         a, b)


def _torch_reader(sigma: bool = False, names: tuple = ("tensor", "mean", "std", "a", "b")) -> Reader:
    def read(locals_: dict, _returned) -> CallArguments | None:
        return _absolute(locals_, locals_.get(names[0]), names[1:], sigma)

    return read


def _shape(value) -> tuple | None:
    if isinstance(value, int):
        return (value,)
    try:
        return tuple(int(d) for d in value)
    except (TypeError, ValueError):
        return None


def _read_keras(locals_: dict, returned) -> CallArguments | None:
    """keras.random.truncated_normal(shape, mean, stddev, dtype, seed): fixed mean ± 2 stddev."""
    mean, std = _scalar(locals_.get("mean")), _scalar(locals_.get("stddev"))
    shape, dtype = _shape(locals_.get("shape")), _dtype_text(getattr(returned, "dtype", None))
    if None in (mean, std, shape, dtype):
        return None
    return CallArguments(shape, dtype, mean, std, mean - 2.0 * std, mean + 2.0 * std)


def _read_jax(locals_: dict, returned) -> CallArguments | None:
    """jax.random.truncated_normal(key, lower, upper, shape, dtype): N(0, 1) on (lower, upper)."""
    lower, upper = _scalar(locals_.get("lower")), _scalar(locals_.get("upper"))
    shape = _shape(getattr(returned, "shape", None))
    dtype = _dtype_text(getattr(returned, "dtype", None))
    if None in (lower, upper, shape, dtype):
        return None
    return CallArguments(shape, dtype, 0.0, 1.0, lower, upper)


def _read_jax_init(locals_: dict, returned) -> CallArguments | None:
    """The init function of jax.nn.initializers.truncated_normal(stddev, lower=, upper=):
    ``truncated_normal(key, lower, upper, shape, dtype) * stddev``."""
    std = _scalar(locals_.get("stddev"))
    lower, upper = _scalar(locals_.get("lower")), _scalar(locals_.get("upper"))
    shape = _shape(getattr(returned, "shape", None))
    dtype = _dtype_text(getattr(returned, "dtype", None))
    if None in (std, lower, upper, shape, dtype):
        return None
    return CallArguments(shape, dtype, 0.0, std, lower * std, upper * std)


KERAS_BACKENDS = ("torch", "jax", "numpy", "tensorflow")


def _keras_sampler() -> str:
    keras = sys.modules.get("keras")
    backend = keras.backend.backend() if keras is not None else "torch"
    return f"keras-{backend}"


RECORDED_FUNCTIONS: tuple[RecordedFunction, ...] = (
    RecordedFunction("torch", "torch.nn.init.trunc_normal_", ("torch/nn/init.py",),
                     "trunc_normal_", _torch_reader(), "tensor"),
    RecordedFunction("timm", "timm.layers.trunc_normal_", ("timm/layers/weight_init.py",),
                     "trunc_normal_", _torch_reader(), "tensor"),
    RecordedFunction("timm-tf", "timm.layers.trunc_normal_tf_", ("timm/layers/weight_init.py",),
                     "trunc_normal_tf_", _torch_reader(sigma=True), "tensor"),
    # keras' initializers call the backend's function directly, keras.random the same one.
    RecordedFunction("keras-*", "keras.random.truncated_normal",
                     ("keras/src/random/random.py",
                      *(f"keras/src/backend/{b}/random.py" for b in KERAS_BACKENDS)),
                     "truncated_normal", _read_keras),
    RecordedFunction("jax", "jax.random.truncated_normal",
                     ("jax/_src/random.py", "jax/_src/random/core.py"), "truncated_normal",
                     _read_jax),
    RecordedFunction("jax-init", "jax.nn.initializers.truncated_normal",
                     ("jax/_src/nn/initializers.py",), "truncated_normal.<locals>.init",
                     _read_jax_init),
)


def user_function(spec: str) -> tuple[RecordedFunction, object]:
    """(how to record it, its code object) for ``--record module:fn``; RecordingError (one line)
    when it cannot be loaded or is not a function. Its convention is the one it declares
    (``harness_convention``, `candidates.candidate`), torch.nn.init's by default; its first five
    parameters are (tensor or shape, mean, std, a, b)."""
    from candidates.loader import CandidateNotFound, load_attribute

    try:
        fn, _, _ = load_attribute(spec)
    except CandidateNotFound as exc:
        raise RecordingError(f"--record {spec!r}: {exc.reason}") from None
    code = getattr(inspect.unwrap(fn), "__code__", None) if callable(fn) else None
    if code is None:
        raise RecordingError(f"--record {spec!r}: not a Python function "
                             f"(a {type(fn).__name__})")
    names = tuple(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    if len(names) < 5:
        raise RecordingError(f"--record {spec!r}: takes {len(names)} parameter(s), not (tensor, "
                             "mean, std, a, b)")
    convention = getattr(fn, "harness_convention", None) or "torch"
    sigma = convention.endswith("sigma")
    if convention.startswith("functional"):
        def read(locals_: dict, returned) -> CallArguments | None:
            if not isinstance(returned, torch.Tensor):
                return None
            return _absolute(locals_, returned, names[1:5], sigma)

        tensor_argument = None
    else:
        read, tensor_argument = _torch_reader(sigma, names[:5]), names[0]
    return RecordedFunction(spec, spec, (), code.co_qualname, read, tensor_argument), code


# ---------------------------------------------------------------------------------- recording


@dataclass
class Call:
    """One recorded call: who made it, its arguments, and (once the model is built) the
    parameters holding its values and their dtype."""

    function: RecordedFunction
    sampler: str
    arguments: CallArguments
    parameters: list = field(default_factory=list)
    holds: str = ""  # the dtype the values end in ("" until resolved: the drawn dtype)


_DATA = torch.Tensor.data  # the descriptor behind ``p.data`` and ``p.data = x``
_CARRIES = {torch.Tensor.to, torch.Tensor.type, torch.Tensor.float, torch.Tensor.half,
            torch.Tensor.bfloat16, torch.Tensor.double, torch.Tensor.clone, torch.Tensor.detach,
            torch.Tensor.contiguous, torch.Tensor.view, torch.Tensor.reshape}


def _is_data(func, name: str) -> bool:
    return getattr(func, "__self__", None) is _DATA and getattr(func, "__name__", "") == name


class _Lineage(TorchFunctionMode):
    """Which recorded call's values each tensor holds (the latest call wins: a tensor drawn twice
    holds the second draw), followed through casts, copies and ``.data``."""

    def __init__(self):
        super().__init__()
        self.holder: WeakIdKeyDictionary = WeakIdKeyDictionary()  # tensor -> Call
        self.owner: WeakIdKeyDictionary = WeakIdKeyDictionary()  # p.data alias -> p

    def mark(self, tensor, call: Call) -> None:
        if isinstance(tensor, torch.Tensor):
            self.holder[tensor] = call
            owner = self.owner.get(tensor)
            if owner is not None:
                self.holder[owner] = call

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.holder or not args or not isinstance(args[0], torch.Tensor):
            return out
        if _is_data(func, "__get__"):
            self.owner[out] = self.owner.get(args[0], args[0])
            call = self.holder.get(args[0])
            if call is not None:
                self.holder[out] = call
        elif func in _CARRIES:
            call = self.holder.get(args[0])
            if call is not None and isinstance(out, torch.Tensor):
                self.holder[out] = call
        elif func is torch.Tensor.copy_ or _is_data(func, "__set__"):
            source = args[1] if len(args) > 1 else (kwargs or {}).get("src")
            call = self.holder.get(source) if isinstance(source, torch.Tensor) else None
            if call is not None:
                self.mark(args[0], call)
        return out


class _Recorder:
    """The profile function: the outermost call of a recorded function, its arguments at the
    call and its tensor (or returned array) at the return."""

    def __init__(self, functions: tuple, user_codes: dict, lineage: _Lineage):
        self.by_name: dict = {}
        for f in functions:
            if f.files:
                self.by_name.setdefault(f.qualname, []).append(f)
        self.user_codes = user_codes  # code object -> RecordedFunction
        self.decided: dict = {}  # code object -> RecordedFunction | None
        self.lineage = lineage
        self.calls: list[Call] = []
        self.unreadable: list[str] = []
        self.active = None  # (frame, function, locals at the call)

    def which(self, code) -> RecordedFunction | None:
        try:
            return self.decided[code]
        except KeyError:
            pass
        found = self.user_codes.get(code)
        if found is None:
            filename = code.co_filename.replace("\\", "/")
            found = next((f for f in self.by_name.get(code.co_qualname, ())
                          if filename.endswith(f.files)), None)
        self.decided[code] = found
        return found

    def __call__(self, frame, event, arg):
        if event == "call":
            if self.active is None:
                function = self.which(frame.f_code)
                if function is not None:
                    self.active = (frame, function, dict(frame.f_locals))
        elif event == "return" and self.active is not None and frame is self.active[0]:
            _, function, locals_ = self.active
            self.active = None
            self.finish(function, locals_, arg)

    def finish(self, function: RecordedFunction, locals_: dict, returned) -> None:
        try:
            arguments = function.read(locals_, returned)
        except Exception:  # a reader must never break the model's build
            arguments = None
        if arguments is None:
            self.unreadable.append(function.label)
            return
        sampler = _keras_sampler() if function.sampler == "keras-*" else function.sampler
        call = Call(function, sampler, arguments)
        self.calls.append(call)
        tensor = (locals_.get(function.tensor_argument) if function.tensor_argument
                  else returned)
        self.lineage.mark(tensor, call)


def record_calls(fn, record: tuple = ()) -> tuple[list[Call], object, list[str]]:
    """Call ``fn()``, recording the calls of `RECORDED_FUNCTIONS` and of the ``--record`` specs in
    `record`; (the calls in call order, what ``fn`` returned, the functions of the calls that
    could not be read as cases). Each call's parameters and final
    dtype are resolved against the returned module (see the module docstring)."""
    user = [user_function(spec) for spec in record]
    lineage = _Lineage()
    recorder = _Recorder(RECORDED_FUNCTIONS, {code: f for f, code in user}, lineage)
    before = sys.getprofile()
    sys.setprofile(recorder)
    try:
        with lineage:
            returned = fn()
    finally:
        sys.setprofile(before)
    _resolve_holders(recorder.calls, lineage, returned)
    return recorder.calls, returned, recorder.unreadable


def _resolve_holders(calls: list, lineage: _Lineage, model) -> None:
    """Each call's parameters (by qualified name) and the dtype they hold, from the module `model`
    (a call no parameter holds keeps its drawn dtype)."""
    if isinstance(model, torch.nn.Module):
        named = list(model.named_parameters(remove_duplicate=False)) + list(
            model.named_buffers(remove_duplicate=False))
        for name, tensor in named:
            call = lineage.holder.get(tensor)
            if call is not None:
                call.parameters.append(name)
                call.holds = call.holds or dtype_name(tensor.dtype)
    for call in calls:
        call.holds = call.holds or call.arguments.dtype


# ---------------------------------------------------------------------------------- as cases


def _label(spec: str) -> str:
    name = spec.rpartition(":")[2].split(".")[-1]
    base = spec.rpartition(":")[0].rstrip("/").rsplit("/", 1)[-1].removesuffix(".py").rsplit(".", 1)[-1]
    text = f"{base}-{name}" if name not in ("build", "main", "init", "model") else base
    return "".join(ch if ch in CASE_ID_CHARS else "-" for ch in text) or "model"


def _group(calls: list) -> list[tuple]:
    """Distinct calls in first-call order: (key, calls), the key being what the case is made of
    (sampler, shape, dtype drawn, dtype held, mean, std, a, b)."""
    groups: dict = {}
    for call in calls:
        x = call.arguments
        key = (call.sampler, call.function.label, x.shape, x.dtype, call.holds, x.mean, x.std,
               x.a, x.b)
        groups.setdefault(key, []).append(call)
    return list(groups.items())


def _call_text(label: str, mean: float, std: float, a: float, b: float) -> str:
    def num(x: float) -> str:
        return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:g}"

    return f"{label}(mean={num(mean)}, std={num(std)}, a={num(a)}, b={num(b)})"


def cases_from(spec: str, record: tuple = ()) -> list[Case]:
    """The cases of the calls `spec`'s function makes (ids ``<label>-<i>``, one per distinct
    call: who made it, shape, dtype drawn and held, mean, std, a, b); RecordingError (one line)
    when it cannot be loaded, raises, or makes no call."""
    from candidates.loader import CandidateNotFound, load_attribute

    try:
        fn, _, _ = load_attribute(spec)
    except CandidateNotFound as exc:
        raise RecordingError(f"--cases-from {spec!r}: {exc.reason}") from None
    if not callable(fn):
        raise RecordingError(f"--cases-from {spec!r}: not callable (a {type(fn).__name__})")
    try:
        with torch.random.fork_rng(devices=[]):
            calls, _, unreadable = record_calls(fn, tuple(record))
    except RecordingError:
        raise
    except Exception as exc:  # the user's model code: one line, no traceback
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise RecordingError(f"--cases-from {spec!r}: calling it raised {type(exc).__name__}"
                             f"{': ' + text[:200] if text else ''}") from None
    if not calls:
        known = ", ".join([f.label for f in RECORDED_FUNCTIONS] + list(record))
        extra = (f" ({len(unreadable)} call(s) with array-valued arguments cannot be cases)"
                 if unreadable else "")
        raise RecordingError(f"--cases-from {spec!r}: it made no truncated-normal call "
                             f"(recorded: {known}; --record module:fn adds one){extra}")
    label = _label(spec)
    out = []
    for i, ((sampler, function, shape, drawn, holds, mean, std, a, b), group) in enumerate(_group(calls)):
        case_id = f"{label}-{i}"
        drawn_in = drawn if drawn != holds else ""
        parameters = tuple(dict.fromkeys(p for call in group for p in call.parameters))
        cast = f", drawn in {drawn} and cast" if drawn_in else ""
        out.append(Case(case_id, mean, std, a, b, shape, ("model",),
                        f"{len(group)} call(s) of {_call_text(function, mean, std, a, b)} in "
                        f"{spec}: {'x'.join(map(str, shape))} {holds}{cast}",
                        spec=case_spec(mean, std, a, b, shape, case_id, drawn_in=drawn_in),
                        dtypes=(holds,), own_shape=True, sampler=sampler, drawn_in=drawn_in,
                        origin=ModelCall(spec, _call_text(function, mean, std, a, b), len(group),
                                         parameters)))
    return out
