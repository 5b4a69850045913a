"""Which devices a run draws on: the names it accepts, the default (cpu and every CUDA device
present), and why a device named but absent here gives skip rows instead of errors."""

from __future__ import annotations

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
