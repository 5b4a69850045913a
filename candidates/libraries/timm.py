"""Adapters for timm's initializers: ``timm`` and ``timm-tf``.

* ``timm`` — ``timm.layers.trunc_normal_(tensor, mean, std, a, b)``: torch.nn.init's convention,
  absolute bounds. Its body is the algorithm torch shipped up to 2.11 (uniform on
  [2Φ(α)−1, 2Φ(β)−1), ``erfinv_``, scale, shift, ``clamp_``), all in the tensor's dtype — timm keeps
  it as its own copy, so torch 2.12's rewrite does not reach timm users.
* ``timm-tf`` — ``timm.layers.trunc_normal_tf_(tensor, mean, std, a, b)``: bounds in σ units; the
  same algorithm on TN(0, 1, a, b), then ``tensor.mul_(std).add_(mean)`` in the dtype (outside
  ``torch.no_grad``, which the contract check's ``nn.Parameter`` probe sees).

Both fill the torch tensor in place on any device; neither takes a generator: they draw from
torch's global RNG. The adapter seeds that RNG with a fresh 63-bit seed drawn from the harness's
generator on every call, inside ``torch.random.fork_rng``, so successive calls differ, the same
harness seed reproduces the bits, and the caller's global RNG state is left as it was.

Loading: ``import timm.layers`` imports torchvision (timm.layers.create_norm), and PyPI's
torchvision does not load beside this project's CPU torch wheel ("operator torchvision::nms does
not exist"). So the adapter imports ``timm.layers`` when that works, and otherwise executes timm's
own ``timm/layers/weight_init.py`` (which imports only torch) from the installed timm, without
timm's package ``__init__``: the functions tested are timm's code either way. Install timm with
``pip install --no-deps timm`` plus its other dependencies (see requirements-libraries.txt).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import torch

from candidates.libraries.common import distribution_version, draw_seed, missing_reason
from candidates.protocol import Candidate

__all__ = ["CANDIDATES", "weight_init", "timm_trunc_normal_", "timm_trunc_normal_tf_"]

_MODULE: list = []
_DIRECT_NAME = "_harness_timm_layers_weight_init"


def weight_init():
    """timm's weight_init module: via ``timm.layers`` if it imports, else from its file."""
    if _MODULE:
        return _MODULE[0]
    try:
        # Through the package, so timm.layers' own imports run first (the public route).
        module = importlib.import_module("timm.layers.weight_init")
    except Exception as exc:  # torchvision missing or broken: see the module docstring
        spec = importlib.util.find_spec("timm")
        if spec is None or not spec.submodule_search_locations:
            raise
        path = Path(list(spec.submodule_search_locations)[0]) / "layers" / "weight_init.py"
        if not path.is_file():
            raise ImportError(f"timm.layers failed to import ({type(exc).__name__}: {exc}) and "
                              f"{path} does not exist") from None
        for name in [n for n in sys.modules if n == "timm" or n.startswith("timm.")]:
            del sys.modules[name]  # a half-imported timm must not linger
        loader_spec = importlib.util.spec_from_file_location(_DIRECT_NAME, path)
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[_DIRECT_NAME] = module
        loader_spec.loader.exec_module(module)
        module.harness_loaded_from = f"{path} (timm.layers: {type(exc).__name__}: {exc})"[:300]
    _MODULE.append(module)
    return module


def _seeded(tensor: torch.Tensor, generator, call):
    """Run ``call()`` with the global RNG of the tensor's device seeded from the harness's
    generator, then put that RNG state back (the other devices' RNGs are not touched)."""
    if tensor.is_meta:
        return call()
    seed = draw_seed(generator)
    if tensor.device.type == "cuda":
        index = tensor.device.index if tensor.device.index is not None else torch.cuda.current_device()
        with torch.random.fork_rng(devices=[index], device_type="cuda"):
            torch.cuda.default_generators[index].manual_seed(seed)
            return call()
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        return call()


def timm_trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """timm.layers.trunc_normal_(tensor, mean, std, a, b), global RNG seeded from ``generator``."""
    fn = weight_init().trunc_normal_
    return _seeded(tensor, generator, lambda: fn(tensor, mean, std, a, b))


def timm_trunc_normal_tf_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """timm.layers.trunc_normal_tf_(tensor, mean, std, a, b), a and b in σ units."""
    fn = weight_init().trunc_normal_tf_
    return _seeded(tensor, generator, lambda: fn(tensor, mean, std, a, b))


def _make(name: str, fn, convention: str):
    def factory() -> Candidate:
        return Candidate(fn, name=name, spec=name, version=distribution_version("timm"),
                         convention=convention, torch_init_semantics=True, accepts_generator=True,
                         unavailable=missing_reason("timm", "--no-deps timm pyyaml huggingface_hub "
                                                    "safetensors"),
                         prepare=weight_init)

    return factory


CANDIDATES = {
    "timm": _make("timm", timm_trunc_normal_, "torch"),
    "timm-tf": _make("timm-tf", timm_trunc_normal_tf_, "sigma"),
}
