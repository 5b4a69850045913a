"""Do two torch releases write the same bytes? The kernel check behind a release's findings.

A release's `trunc_normal_` may hold the same Python text as another's and still write other
values: `normal_` and `uniform_` are kernels, and a kernel may change between releases. This
script draws, on the CPU and for one generator seed, `torch.nn.init.trunc_normal_` on every grid
case and the two kernels under it (`normal_(0, 1)`, `uniform_(a, b)` on a case's window) in each
float dtype, and writes the SHA-256 digest of each output's bytes (or the error it raised, or that
it did not return in time) to a JSON file. Run it in each release's environment, then compare:

    python benchmarks/torch_bytes.py write OUT.json [--seed 20260101] [--timeout 60]
    python benchmarks/torch_bytes.py compare BASE.json NEW.json

`compare` prints one line per draw that differs and a count; exit 0 when every draw is the same
in both (the same digest, or the same error), 1 otherwise.

Each draw fills 65 536 elements (256 x 256), except deep-window-10-1000, whose 64-element call
is what returns in seconds (its rejection loop accepts ~1e-4 of the proposals).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.cases import GRID  # noqa: E402

DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}
SEED = 20260101
FULL_SHAPE = (256, 256)
#: Cases whose full-size call does not return in seconds: drawn at this shape instead.
SMALL_SHAPES = {"deep-window-10-1000": (1, 64)}
#: The kernels under the rejection rewrite, drawn on a case's own parameters.
KERNELS = ("normal_", "uniform_")


class DrawTimeout(Exception):
    """A draw that did not return within the timeout."""


def digest(tensor: torch.Tensor) -> str:
    """SHA-256 of a tensor's bytes, in its dtype, row-major."""
    raw = tensor.contiguous().view(torch.uint8).numpy().tobytes()
    return hashlib.sha256(raw).hexdigest()


def draw(what: str, case, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """One draw of `what` (trunc_normal_ or a kernel) for `case` into a new CPU tensor."""
    tensor = torch.empty(SMALL_SHAPES.get(case.id, FULL_SHAPE), dtype=dtype)
    generator = torch.Generator().manual_seed(seed)
    if what == "trunc_normal_":
        torch.nn.init.trunc_normal_(tensor, case.mean, case.std, case.a, case.b,
                                    generator=generator)
    elif what == "normal_":
        tensor.normal_(case.mean, case.std, generator=generator)
    else:
        tensor.uniform_(max(case.a, -1e4), min(case.b, 1e4), generator=generator)
    return tensor


def outcome(what: str, case, dtype: torch.dtype, seed: int, timeout: int) -> str:
    """The digest of one draw, or 'raises: ...' or 'timeout: ...' where it gave no tensor."""
    def expire(signum, frame):
        raise DrawTimeout()

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(timeout)
    try:
        return "sha256:" + digest(draw(what, case, dtype, seed))
    except DrawTimeout:
        return f"timeout: no return within {timeout} s"
    except Exception as exc:  # a release's own error is an outcome to compare, not a crash
        return f"raises: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def draw_keys():
    """(function, case, dtype name) of every draw, trunc_normal_ first."""
    for what in ("trunc_normal_", *KERNELS):
        for case in GRID:
            for name in DTYPES:
                yield what, case, name


def write(path: str, seed: int, timeout: int) -> None:
    outcomes = {f"{what} {case.id} {name}": outcome(what, case, DTYPES[name], seed, timeout)
                for what, case, name in draw_keys()}
    record = {"torch": torch.__version__, "seed": seed, "device": "cpu", "outcomes": outcomes}
    Path(path).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    returned = sum(v.startswith("sha256:") for v in outcomes.values())
    print(f"torch {torch.__version__}: {len(outcomes)} draws, {returned} returned, "
          f"{len(outcomes) - returned} raised or timed out -> {path}")


def compare(base_path: str, new_path: str) -> int:
    base = json.loads(Path(base_path).read_text(encoding="utf-8"))
    new = json.loads(Path(new_path).read_text(encoding="utf-8"))
    if base["seed"] != new["seed"]:
        print(f"torch_bytes: seeds differ ({base['seed']} vs {new['seed']}): nothing to compare")
        return 1
    keys = sorted(set(base["outcomes"]) | set(new["outcomes"]))
    differ = [k for k in keys if base["outcomes"].get(k) != new["outcomes"].get(k)]
    for k in differ:
        print(f"  {k}: {base['outcomes'].get(k, 'absent')} -> {new['outcomes'].get(k, 'absent')}")
    same_bytes = sum(1 for k in keys if k not in differ
                     and str(base["outcomes"].get(k)).startswith("sha256:"))
    print(f"torch {base['torch']} vs {new['torch']}, seed {base['seed']}, CPU: {len(keys)} draws, "
          f"{len(keys) - len(differ)} the same ({same_bytes} the same bytes, the others the same "
          f"error), {len(differ)} differ")
    return 1 if differ else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="draw every case and kernel; write their digests")
    w.add_argument("out")
    w.add_argument("--seed", type=int, default=SEED)
    w.add_argument("--timeout", type=int, default=60, help="seconds one draw may take")
    c = sub.add_parser("compare", help="compare two files `write` wrote")
    c.add_argument("base")
    c.add_argument("new")
    args = parser.parse_args(argv)
    if args.command == "write":
        write(args.out, args.seed, args.timeout)
        return 0
    return compare(args.base, args.new)


if __name__ == "__main__":
    sys.exit(main())
