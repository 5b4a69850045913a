"""Deterministic seeds: one per (run seed, candidate, case, dtype, device, stage).

Seeds come from a cryptographic hash of the parts, so a verdict depends only on what is tested and
the run seed, never on -n, the worker, or the order tests ran in.
"""

from __future__ import annotations

import hashlib

DEFAULT_RUN_SEED = 20260101


def derive_seed(run_seed: int, *parts: object) -> int:
    """A 63-bit seed from the run seed and any parts (names, stage numbers); stable across runs."""
    text = "\x1f".join([str(int(run_seed))] + [str(p) for p in parts])
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1
