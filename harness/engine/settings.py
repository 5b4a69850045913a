"""torch's process-wide settings a sampler must leave as it found them.

The default dtype and device, deterministic algorithms, grad mode and the thread count hold for
every later computation of the program that called the sampler: an initializer that turns off
grad mode, or sets float64 as the default dtype for its own arithmetic, and does not set it back,
changes its user's training. The harness puts them back after a candidate's calls (a draw, an
API check's probe), so one group's candidate does not change what the next group sees, and
`contract` fails a candidate that changes one.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

#: What `torch_settings` holds, in its order.
SETTINGS = ("default dtype", "default device", "deterministic algorithms", "grad mode",
            "threads")


def torch_settings() -> tuple:
    """The settings of `SETTINGS`, now (the default device None on a torch without one)."""
    device = torch.get_default_device() if hasattr(torch, "get_default_device") else None
    deterministic = ("warn only" if torch.is_deterministic_algorithms_warn_only_enabled()
                     else "on") if torch.are_deterministic_algorithms_enabled() else "off"
    return (torch.get_default_dtype(), device, deterministic,
            "on" if torch.is_grad_enabled() else "off", torch.get_num_threads())


def changes(names: tuple, before: tuple, after: tuple, bare: frozenset = frozenset()) -> str | None:
    """What differs between two tuples of named facts, ``name was -> now`` each (only the name
    for those in `bare`: a storage address says nothing), None where nothing."""
    if after == before:
        return None
    return "; ".join(name if name in bare else f"{name} {was} -> {now}"
                     for name, was, now in zip(names, before, after) if was != now)


def changed_settings(before: tuple) -> str | None:
    """What differs from `before` (`torch_settings`), None where nothing."""
    return changes(SETTINGS, before, torch_settings())


def restore_settings(before: tuple) -> None:
    """Set back each of the settings that differs from `before` (and only those: setting a
    default device, even the one in force, puts a mode on every later torch call)."""
    dtype, device, deterministic, grad, threads = before
    now = torch_settings()
    if now[0] != dtype:
        torch.set_default_dtype(dtype)
    if now[1] != device and device is not None:
        torch.set_default_device(None if device == torch.device("cpu") else device)
    if now[2] != deterministic:
        torch.use_deterministic_algorithms(deterministic != "off",
                                           warn_only=deterministic == "warn only")
    if now[3] != grad:
        torch.set_grad_enabled(grad == "on")
    if now[4] != threads:
        torch.set_num_threads(threads)


class Kept:
    """What the calls inside `kept_settings` changed of torch's settings (`changed_settings`'s
    text, None where nothing), known once they end."""

    changed: str | None = None


@contextmanager
def kept_settings():
    """torch's process-wide settings as they are now, set back when the enclosed calls end,
    however they end: the candidate's next group, and the harness, see them as they were. Yields
    a `Kept` that says what they had changed."""
    settings = torch_settings()
    kept = Kept()
    try:
        yield kept
    finally:
        kept.changed = changed_settings(settings)
        if kept.changed is not None:
            restore_settings(settings)
