"""Which devices a run draws on: the names it accepts, the default (cpu and every CUDA device
present), and why a device named but absent here, or a tensor larger than its memory, gives
skip rows instead of errors."""

from __future__ import annotations

import math
import os

import torch

from .options import OptionError


def check_device_name(name: str) -> None:
    """A device the harness can sample on: a torch device name, not `meta` (which holds no
    values). Whether it is present on this machine is decided per test (`device_skip_reason`)."""
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise OptionError(f"--devices: {name!r} is not a torch device") from None
    if device.type == "meta":
        raise OptionError("--devices: 'meta' holds no values to test (the contract check "
                                "covers meta tensors)")


def device_skip_reason(name: str) -> str | None:
    """Why tests on device `name` cannot run here (None: they can); an explicit skip, not an error."""
    device = torch.device(name)
    if device.type == "cpu":
        return None
    backend = getattr(torch, device.type, None)
    is_available = getattr(backend, "is_available", None)
    if is_available is None or not is_available():
        return f"device {name}: {device.type} is not available on this machine"
    count = getattr(backend, "device_count", lambda: 1)()
    if device.index is not None and device.index >= count:
        return f"device {name}: only {count} {device.type} device(s) present"
    return None


def default_devices() -> list[str]:
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return devices


#: Bytes of device memory one element of a call's tensor needs while it is drawn and folded: the
#: tensor, the fold's float and integer scratch (a big call's hashes are worked a slice at a
#: time) and the previous call kept for the successive pairs, with the sampler's own work.
#: Measured on CPU, float32: peak RSS grows by 28 B per element between 2^24 and 2^25 elements
#: with the exact sampler (float64 work); torch 2.13's sampler adds ~13 B of its own
#: temporaries; 64 leaves headroom for a sampler that needs more.
BYTES_PER_ELEMENT = 64


def available_memory(device) -> int | None:
    """Bytes the device can still hand out (None where it cannot be told)."""
    device = torch.device(device)
    if device.type == "cuda":
        try:
            return int(torch.cuda.mem_get_info(device)[0])
        except (RuntimeError, AssertionError):
            return None
    if device.type == "cpu":
        try:
            with open("/proc/meminfo") as meminfo:
                for line in meminfo:
                    if line.startswith("MemAvailable:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            return None
    return None


class MemoryReasons:
    """`memory_skip_reason` asked once per (shape, device) and kept: the free memory of a busy
    device moves between tests, and every group of a shape should get the same verdict."""

    def __init__(self):
        self.known: dict = {}

    def __call__(self, shape: tuple, device) -> str | None:
        key = (tuple(shape), str(device))
        if key not in self.known:
            self.known[key] = memory_skip_reason(shape, device)
        return self.known[key]


def memory_skip_reason(shape, device, available=None) -> str | None:
    """Why one call of `shape` cannot be drawn on `device` (None: it fits, or memory cannot be
    told): an estimate of `BYTES_PER_ELEMENT` per element against the memory free now."""
    numel = math.prod(tuple(shape)) if len(tuple(shape)) else 1
    needed = numel * BYTES_PER_ELEMENT
    if available is None:
        available = available_memory(device)
    if available is None or needed <= available:
        return None
    gib = 1 << 30
    dims = "x".join(str(d) for d in shape)
    return (f"shape {dims} ({numel} elements) needs about {needed / gib:.1f} GiB on {device} "
            f"({BYTES_PER_ELEMENT} B per element drawn and folded); {available / gib:.1f} GiB "
            f"free here")
