"""Built-in candidates for sharded parameters (DTensors), good and known-bad, and their saboteurs.

* ``exact-counter`` (good) — the gold sampler's law (`candidates.kernels.inverse_cdf`
  in float64, one RN cast) with u from a *counter-based* stream: element number k of the whole
  tensor (row-major, global position) gets u = SplitMix64(key + (k + 1) * golden gamma) >> 11 times
  2^-53, the key drawn once per call from the generator. On a DTensor every rank computes its own
  elements from their global positions, with the key of mesh coordinate 0 (broadcast), so the
  whole tensor is the same on 1, 2 or 4 ranks under any placement and rank seeding: it declares
  itself sharding-invariant, and the `sharding` check holds it to that bit for bit. On a plain
  tensor it is a plain exact sampler (passes the calibration self-test like `exact`). In float64
  the draw is refined as `exact`'s (`candidates.kernels.refine_float64`), its uniforms from the
  same counter stream far past the tensor's positions.
* ``local-shard`` (known-bad) — the DTensor branch of the seed's workaround
  (shared/seeds/001_496432e690538caa.txt): cast to float32, ``trunc_normal_`` on the float32
  DTensor's ``_local_tensor`` ("safe because trunc_normal_ is elementwise") with the rank's own
  generator, cast back. With one seed on every rank, as training scripts seed, every shard is the
  same draw: caught by `shards`. Never "fix" it.

Self-test saboteurs (``selftest-*``, in `SHARDED_SELFTESTS`; each breaks one thing on a DTensor and
is exact-counter everywhere else):

* ``selftest-shifted-shards`` — rank r reads the stream r local rows further on: a row of shard r
  repeats row k + 1 of shard r - 1 at another local index (the `shards` component "repeated rows");
* ``selftest-mirrored-shards`` — odd ranks use 1 - u of rank 0's stream at the same local index
  (the component "correlation");
* ``selftest-replica-drift`` — the key is mixed with the rank and not broadcast: replicas differ
  (`replicas`);
* ``selftest-layout-dependent`` — the key is mixed with the world size, and the candidate declares
  itself sharding-invariant (`sharding`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from candidates.dtensor import broadcast_from_origin, is_dtensor, local_box, mesh_rank
from candidates.kernels import (CHUNK, counter_uniform, global_flat_index,
                                harness_version, inverse_cdf, refine_float64, rn_scalar,
                                truncated_normal, validate_args)
from candidates.protocol import Candidate
from candidates.rounding import rn_cast

__all__ = ["exact_counter_trunc_normal_", "local_shard_trunc_normal_",
           "SHARDED_REGISTRY", "SHARDED_SELFTESTS"]

def _draw_key(generator, device) -> int:
    dev = generator.device if generator is not None else device
    return int(torch.randint(0, 2**62, (1,), generator=generator, device=dev).item())


#: The refinement's draw d of element k is the main stream's number k + (d + 1) * 2^40: streams no
#: tensor below 2^40 elements shares with its u's, a function of the global position alone.
_REFINE_STRIDE = 1 << 40


def _refinement_stream(key: int, index: np.ndarray) -> Callable:
    """`candidates.kernels.refine_float64`'s uniforms for the elements of global positions `index`."""
    def uniforms(where: torch.Tensor, draw: int) -> torch.Tensor:
        at = index[where.cpu().numpy()] + (draw + 1) * _REFINE_STRIDE
        return torch.from_numpy(counter_uniform(key, at))
    return uniforms


def _counter_fill(tensor, mean, std, a, b, generator, *, key_map=None, index_map=None,
                  u_map=None, broadcast: bool = True):
    """The exact-counter sampler with hooks for the saboteurs: `key_map(key, tensor)`,
    `index_map(index, tensor)`, `u_map(u, tensor)` (each sees the DTensor or the plain tensor)."""
    mean, std, a, b = validate_args(mean, std, a, b)
    if tensor.is_meta:
        return tensor
    with torch.no_grad():
        dtensor = is_dtensor(tensor)
        local = tensor.to_local() if dtensor else tensor
        key = _draw_key(generator, local.device)
        if dtensor and broadcast:
            key = broadcast_from_origin(key, tensor)
        if key_map is not None:
            key = key_map(key, tensor)
        if local.numel() == 0:
            return tensor
        if a == b:
            local.copy_(rn_scalar(a, local).expand(local.shape))
            return tensor
        if dtensor:
            offsets, local_shape = local_box(tensor)
        else:
            offsets, local_shape = (0,) * local.dim(), tuple(local.shape)
        index = global_flat_index(tuple(tensor.shape), offsets, local_shape)
        if index_map is not None:
            index = index_map(index, tensor)
        dist = truncated_normal(mean, std, a, b)
        n = local.numel()
        out = local.view(-1) if local.is_contiguous() else torch.empty(n, dtype=local.dtype,
                                                                       device=local.device)
        for start in range(0, n, CHUNK):
            k = min(CHUNK, n - start)
            u = counter_uniform(key, index[start:start + k])
            if u_map is not None:
                u = u_map(u, tensor)
            x = inverse_cdf(dist, torch.from_numpy(u))
            if local.dtype == torch.float64 and u_map is None:
                x = refine_float64(x, dist, _refinement_stream(key, index[start:start + k]))
            out[start:start + k].copy_(rn_cast(x, local.dtype).to(local.device))
        if not local.is_contiguous():
            local.copy_(out.view(local.shape))
        return tensor


def exact_counter_trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Exact inverse CDF with u from a counter-based stream indexed by global position: the same
    whole tensor on any mesh and placement (sharding-invariant by construction)."""
    return _counter_fill(tensor, mean, std, a, b, generator)


def local_shard_trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """The seed's DTensor workaround: trunc_normal_ in float32 on the local tensor, with the rank's
    own generator, cast back (identical shards when every rank has the same seed).

    On a plain tensor it is the installed torch's trunc_normal_ in float32, cast back (the
    workaround's other branch). Caught by: shards (on a DTensor; every component at p ~ 0)."""
    orig_dtype = tensor.dtype
    with torch.no_grad():
        tensor_fp32 = tensor.to(dtype=torch.float32)
        if is_dtensor(tensor):
            # "Local init (safe because trunc_normal_ is elementwise)"; under no_grad to_local()
            # is the DTensor's own local tensor, so the init writes into tensor_fp32
            torch.nn.init.trunc_normal_(tensor_fp32.to_local(), mean=mean, std=std, a=a, b=b,
                                        generator=generator)
        else:
            torch.nn.init.trunc_normal_(tensor_fp32, mean=mean, std=std, a=a, b=b,
                                        generator=generator)
        tensor.copy_(tensor_fp32.to(dtype=orig_dtype))
    return tensor


# -------------------------------------------------------------------------------- saboteurs


def _sharded_placement(tensor) -> bool:
    return is_dtensor(tensor) and any(hasattr(p, "dim") for p in tensor.placements)


def shifted_shards_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """exact-counter, but on a Shard placement rank r reads the stream r local rows further on:
    shard r's row k repeats shard r-1's row k+1 (caught by: shards, repeated rows; where the
    local rows are whole rows, independence's duplicate rows of the whole tensor too)."""
    def index_map(index, t):
        if not _sharded_placement(t):
            return index
        local = t.to_local()
        shift = mesh_rank(t) * (local.shape[-1] if local.dim() else 1)
        return np.arange(index.size, dtype=np.int64) + shift  # local positions, shifted
    return _counter_fill(tensor, mean, std, a, b, generator, index_map=index_map)


def mirrored_shards_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """exact-counter, but on a Shard placement every rank reads the stream at its *local* index and
    odd ranks take 1 - u: shards perfectly anti-correlated (caught by: shards, correlation)."""
    def index_map(index, t):
        return np.arange(index.size, dtype=np.int64) if _sharded_placement(t) else index

    def u_map(u, t):
        if _sharded_placement(t) and mesh_rank(t) % 2:
            return (1.0 - u) - 2.0**-53  # the midpoint lattice onto its mirror image
        return u
    return _counter_fill(tensor, mean, std, a, b, generator, index_map=index_map, u_map=u_map)


def replica_drift_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """exact-counter without the key broadcast and with the key mixed with the rank: ranks of a
    Replicate placement hold different tensors (caught by: replicas)."""
    def key_map(key, t):
        return key ^ (0x5DEECE66D * mesh_rank(t)) if is_dtensor(t) else key
    return _counter_fill(tensor, mean, std, a, b, generator, key_map=key_map, broadcast=False)


def layout_dependent_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """exact-counter with the key mixed with the world size, declared sharding-invariant: right in
    law on every layout, but not the tensor W = 1 gives (caught by: sharding)."""
    def key_map(key, t):
        return key ^ (0x2545F4914F6CDD1D * t.device_mesh.size()) if is_dtensor(t) else key
    return _counter_fill(tensor, mean, std, a, b, generator, key_map=key_map)


def _make(name: str, fn: Callable, known_bad: bool = False, **kw) -> Callable[[], Candidate]:
    def factory() -> Candidate:
        defect = (fn.__doc__ or "").strip().splitlines()[0] if known_bad else ""
        return Candidate(fn, name=name, spec=name, version=harness_version(),
                         torch_init_semantics=True, known_bad=known_bad, defect=defect, **kw)

    factory.__name__ = f"make_{name.replace('-', '_')}"
    return factory


SHARDED_REGISTRY: dict[str, Callable[[], Candidate]] = {
    "exact-counter": _make("exact-counter", exact_counter_trunc_normal_, sharding_invariant=True),
    "local-shard": _make("local-shard", local_shard_trunc_normal_, known_bad=True,
                         caught_by=("shards",)),
}

SHARDED_SELFTESTS: dict[str, Callable[[], Candidate]] = {
    "selftest-shifted-shards": _make("selftest-shifted-shards", shifted_shards_, known_bad=True),
    "selftest-mirrored-shards": _make("selftest-mirrored-shards", mirrored_shards_, known_bad=True),
    "selftest-replica-drift": _make("selftest-replica-drift", replica_drift_, known_bad=True),
    "selftest-layout-dependent": _make("selftest-layout-dependent", layout_dependent_,
                                       known_bad=True, sharding_invariant=True),
}
