"""The yardstick a candidate's speed is quoted against: torch's own ``normal_`` on the same tensor."""

from __future__ import annotations

import math
import time

import torch


_NORMAL_RATES: dict = {}

#: From this many elements one ``normal_`` call is long next to its dispatch: no warm-up call,
#: and one call long enough is the measurement.
LONG_CALL_ELEMENTS = 1 << 20


def normal_throughput(shape: tuple, dtype: torch.dtype, device, min_seconds: float = 0.02) -> float:
    """Samples per second of torch's own ``normal_`` filling a tensor of `shape` on `device`: the
    yardstick a candidate's throughput is quoted against (both are timed on the same machine in
    the same process, so the ratio carries across machines). NaN where ``normal_`` does not
    support the dtype. Measured once per (shape, dtype, device) and process."""
    device = torch.device(device)
    key = (tuple(shape), dtype, str(device))
    if key in _NORMAL_RATES:
        return _NORMAL_RATES[key]
    rate = math.nan
    try:
        tensor = torch.empty(shape, dtype=dtype, device=device)
        generator = torch.Generator(device=device).manual_seed(0)
        long_calls = tensor.numel() >= LONG_CALL_ELEMENTS
        if long_calls:
            tensor.zero_()  # the pages touched, outside the timed calls
        else:
            tensor.normal_(generator=generator)  # first call: allocation and dispatch warm-up
        calls, t0 = 0, time.perf_counter()
        while True:
            tensor.normal_(generator=generator)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            calls += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= min_seconds and (long_calls or calls >= 2):
                break
        rate = calls * max(1, tensor.numel()) / elapsed
    except (RuntimeError, NotImplementedError, TypeError):
        pass
    _NORMAL_RATES[key] = rate
    return rate
