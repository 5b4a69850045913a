"""The DTensor plumbing `candidates.fast_exact` and `candidates.dtensor_samplers` share to fill a
rank's part.

* `is_dtensor` — whether a tensor is a DTensor (False where torch has no ``torch.distributed``);
* `mesh_rank` — a rank's coordinate along the first dimension of the DTensor's mesh;
* `broadcast_from_origin` — the key of mesh coordinate (0, ..., 0), on every rank of the mesh
  (`broadcast_tensor_from_origin`: the same for a key held in a device tensor, never read back);
* `local_box` — (global offsets, local shape) of this rank's part of a DTensor.

``torch.distributed`` is imported on first use, so that importing the samplers does not need it.
"""

from __future__ import annotations

import torch

from candidates.kernels import chunk_sizes

__all__ = ["is_dtensor", "mesh_rank", "broadcast_from_origin", "broadcast_tensor_from_origin",
           "local_box"]


def is_dtensor(tensor) -> bool:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - torch without distributed
        return False
    return isinstance(tensor, DTensor)


def mesh_rank(tensor) -> int:
    coordinate = tensor.device_mesh.get_coordinate()
    return int(coordinate[0]) if coordinate else 0


def broadcast_from_origin(key: int, tensor) -> int:
    """The key of mesh coordinate (0, ..., 0), on every rank of the DTensor's mesh."""
    key_t = torch.tensor([key], dtype=torch.int64, device=tensor.to_local().device)
    return int(broadcast_tensor_from_origin(key_t, tensor).item())


def broadcast_tensor_from_origin(key: torch.Tensor, tensor) -> torch.Tensor:
    """`key` (a tensor on the rank's device) as mesh coordinate (0, ..., 0) holds it, on every
    rank of the DTensor's mesh, in place: a collective, no read of its value on the host."""
    import torch.distributed as dist

    mesh = tensor.device_mesh
    for dim in range(mesh.ndim):
        group = mesh.get_group(dim)
        dist.broadcast(key, src=dist.get_global_rank(group, 0), group=group)
    return key


def local_box(tensor) -> tuple[tuple, tuple]:
    """(global offsets, local shape) of this rank's part of a DTensor."""
    local_shape = tuple(tensor.to_local().shape)
    try:
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

        shape, offsets = compute_local_shape_and_global_offset(tensor.shape, tensor.device_mesh,
                                                               tensor.placements)
        return tuple(int(o) for o in offsets), tuple(int(s) for s in shape)
    except ImportError:  # pragma: no cover - older torch: a 1-D mesh, torch.chunk's split by hand
        offsets, shape = [0] * tensor.dim(), list(tensor.shape)
        placement = tensor.placements[0]
        if hasattr(placement, "dim"):
            sizes = chunk_sizes(tensor.shape[placement.dim], tensor.device_mesh.size())
            rank = mesh_rank(tensor)
            offsets[placement.dim], shape[placement.dim] = sum(sizes[:rank]), sizes[rank]
        assert tuple(shape) == local_shape
        return tuple(offsets), tuple(shape)
