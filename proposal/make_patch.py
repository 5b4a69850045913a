"""Write the torch patch: fast-exact as the body of ``torch.nn.init._no_grad_trunc_normal_``.

The patch has two parts, both ours:

* a new module, ``torch/nn/_trunc_normal.py``: the fixed-work strategy of
  `candidates.fast_exact` (with the pieces of `candidates.kernels` and `candidates.dtensor` it
  uses), its definitions copied by name into one self-contained module (torch and the standard
  library only), constants first, laid out as PEP 8 wants: the same few dozen ops per device
  call, no host read, compiled whole by torch.compile(fullgraph=True), in cache-sized passes on
  an eager CPU (the same values); at most 400 lines with the init.py diff;
* a diff of ``torch/nn/init.py``, computed against the init.py it is given: the body of
  ``_no_grad_trunc_normal_`` becomes a call into the new module, the description in
  ``trunc_normal_``'s docstring says what it now writes, and one import line joins the module's
  imports. Each place is found by ``ast`` (the function, the docstring, the imports), never by
  line number or by matching torch's text, so the diff follows the file wherever those sit.

The repository stores no torch source: init.py is read from the installed torch (the default),
from a wheel, or from a file. torch 2.13.0's, 2.14.1's and 2.15.0's init.py are the same bytes.

    python proposal/make_patch.py                               # installed torch, to stdout
    python proposal/make_patch.py --wheel torch-2.15.0-*.whl -o trunc_normal.patch
    python proposal/make_patch.py --init path/to/torch/nn/init.py

A maintainer applies the output with ``patch -p1`` (or ``git apply``) at the root of a torch
checkout. tests/unit/proposal/test_patch.py applies it to the installed torch's init.py and runs
the harness and torch's published trunc_normal tests on the patched function.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import hashlib
import importlib.util
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INIT_PATH = "torch/nn/init.py"
MODULE_PATH = "torch/nn/_trunc_normal.py"
#: The function whose body the patch replaces, and the public one whose docstring it rewrites.
SAMPLER = "_no_grad_trunc_normal_"
PUBLIC = "trunc_normal_"
#: The name the patched init.py gives the new module's entry point.
ENTRY = "_exact_trunc_normal_"
#: The module's function the sampler calls.
FUNCTION = "fixed_work_trunc_normal_"
IMPORT_LINE = f"from torch.nn._trunc_normal import {FUNCTION} as {ENTRY}\n"

#: (source file, top-level names copied from it, in order): the fixed-work strategy of
#: `candidates.fast_exact` (the CPU's chunked strategy is the harness candidate's alone) and the
#: pieces of `candidates.kernels` and `candidates.dtensor` it uses; the constants first, together.
PIECES = (
    ("candidates/kernels.py", ("REFINE_WIDTH_BITS",)),
    ("candidates/fast_exact.py", ("NORMAL_REACH", "GL_MAX_DECAY", "_SQRT_HALF", "_GL_NODES",
                                  "_GL_WEIGHTS", "BLOCK", "_GAMMA", "_SPLITMIX", "_HALF")),
    ("candidates/kernels.py", ("validate_args",)),
    ("candidates/dtensor.py", ("is_dtensor", "local_box", "broadcast_tensor_from_origin")),
    ("candidates/fast_exact.py", ("_mills", "tail_mass", "Proposal", "choose_proposal", "splitmix64",
                                  "block_layout", "propose_fixed", "refine_low_bits",
                                  "round_to_16bit", FUNCTION)),
)
#: Definitions replaced in the module: a DTensor's box by the API of the torch the patch is for
#: (the harness's version also reads older releases).
REPLACED = {"local_box": '''def local_box(tensor) -> tuple[tuple, tuple]:
    """(global offsets, local shape) of this rank's part of a DTensor."""
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    shape, offsets = compute_local_shape_and_global_offset(tensor.shape, tensor.device_mesh,
                                                           tensor.placements)
    return tuple(int(o) for o in offsets), tuple(int(s) for s in shape)'''}

MODULE_HEADER = f'''"""Truncated normal sampling for ``torch.nn.init.trunc_normal_``: exact in every dtype, in fixed work.

Y = RN(X), X ~ TN(mean, std, a, b) rounded once into the tensor's dtype. Each element's randomness is
SplitMix64 of its position and one key from the generator (a DTensor's parts hold the plain tensor's
values; a repeating generator repeats calls, never loops), and each block of 2^14 elements tests a
fixed number of proposals (short w.p. <= 2^-64 per call): the same few dozen ops whatever the size
and the outcome, no host read, compiled whole. From the harness's ``candidates/fast_exact.py``.
"""

import math
from collections import namedtuple

import torch

__all__ = ["{FUNCTION}"]
'''

#: The new body of the sampler, under the signature the given init.py declares.
SAMPLER_BODY = f'''    # exact, in bounded work, for any window; ValueError for bad parameters
    return {ENTRY}(tensor, mean, std, a, b, generator=generator)
'''

#: The description in the public docstring: between its summary line and its argument list.
DESCRIPTION = '''    The values are drawn exactly from :math:`\\mathcal{N}(\\text{mean}, \\text{std}^2)`
    restricted to :math:`[a, b]` (absolute bounds), for any window, and rounded
    once to the nearest value of the tensor's dtype: a bound representable in
    the dtype gets only the half of its rounding cell inside :math:`[a, b]`.
'''


class LayoutError(ValueError):
    """The given init.py does not have the shape the patch edits (a function, docstring or
    argument it needs is missing)."""


# ------------------------------------------------------------------------------ the new module


def _definitions(path: Path) -> dict[str, str]:
    """Top-level name -> source text of its definition (functions, classes, assignments)."""
    text = path.read_text()
    lines = text.splitlines()
    out = {}
    for node in ast.parse(text).body:
        names = []
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [n.id for t in node.targets for n in (t.elts if isinstance(t, ast.Tuple) else [t])
                     if isinstance(n, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        if not names:
            continue
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
        # the `#:` comment lines right above a constant document it
        while start > 1 and lines[start - 2].startswith("#:"):
            start -= 1
        segment = "\n".join(lines[start - 1:node.end_lineno])
        for name in names:
            out[name] = segment
    return out


def _is_definition(segment: str) -> bool:
    """Whether a segment defines a function or class (its first line past the `#:` comments)."""
    first = next(line for line in segment.splitlines() if not line.startswith("#:"))
    return first.startswith(("def ", "class ", "@"))


def module_text() -> str:
    """The text of torch/nn/_trunc_normal.py, from the harness's sources: each definition once,
    in PIECES' order; consecutive constants together, two blank lines around the rest (PEP 8)."""
    segments: list[str] = []
    for rel, names in PIECES:
        defs = _definitions(ROOT / rel)
        segments.extend(REPLACED.get(name, defs[name]) for name in names)
    text, previous = MODULE_HEADER.rstrip("\n"), None
    for segment in dict.fromkeys(segments):  # a tuple assignment names several: keep it once
        definition = _is_definition(segment)
        text += ("\n" if previous is False and not definition else "\n\n\n") + segment
        previous = definition
    return text + "\n"


# ------------------------------------------------------------------------------ the init.py edit


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if len(found) != 1:
        raise LayoutError(f"init.py: {len(found)} top-level functions named {name}")
    return found[0]


def _body_span(fn: ast.FunctionDef) -> tuple[int, int]:
    """0-based [start, end) of the lines after the signature: the comments and statements of the
    body (a docstring included), up to the function's last line."""
    if fn.returns is None:
        raise LayoutError(f"init.py: {fn.name} declares no return type (its signature's end)")
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    missing = {"tensor", "mean", "std", "a", "b", "generator"} - set(names)
    if missing:
        raise LayoutError(f"init.py: {fn.name} takes no {', '.join(sorted(missing))}")
    return fn.returns.end_lineno, fn.end_lineno


def _description_span(fn: ast.FunctionDef, lines: list[str]) -> tuple[int, int]:
    """0-based [start, end) of the docstring's description: the lines after the blank line that
    ends its summary, up to the line that opens its argument list ("Args:")."""
    doc = fn.body[0] if fn.body else None
    if not (isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
            and isinstance(doc.value.value, str)):
        raise LayoutError(f"init.py: {fn.name} has no docstring")
    first, last = doc.lineno - 1, doc.end_lineno
    blank = next((i for i in range(first, last) if not lines[i].strip()), None)
    args = next((i for i in range(first, last) if lines[i].strip() == "Args:"), None)
    if blank is None or args is None or args <= blank + 1:
        raise LayoutError(f"init.py: {fn.name}'s docstring has no description before its Args:")
    return blank + 1, args


def _import_end(tree: ast.Module) -> int:
    """0-based index of the line after the last top-level import before the first definition."""
    end = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            break
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            end = node.end_lineno
    if end is None:
        raise LayoutError("init.py: no import precedes the first definition")
    return end


def patched_init(original: str) -> str:
    """`original` (a torch/nn/init.py) with the sampler calling the new module."""
    tree = ast.parse(original)
    lines = original.splitlines(keepends=True)
    body = _body_span(_function(tree, SAMPLER))
    description = _description_span(_function(tree, PUBLIC), lines)
    imports = _import_end(tree)
    edits = sorted([(body, SAMPLER_BODY), (description, DESCRIPTION + "\n"),
                    ((imports, imports), IMPORT_LINE)], reverse=True)
    for (start, end), text in edits:  # from the end of the file, so earlier spans stay put
        lines[start:end] = text.splitlines(keepends=True)
    return "".join(lines)


def patch_text(original: str) -> str:
    """The unified diff, for ``patch -p1`` at a torch checkout's root: init.py, then the module."""
    init_diff = difflib.unified_diff(original.splitlines(keepends=True),
                                     patched_init(original).splitlines(keepends=True),
                                     f"a/{INIT_PATH}", f"b/{INIT_PATH}")
    module_diff = difflib.unified_diff([], module_text().splitlines(keepends=True),
                                       "/dev/null", f"b/{MODULE_PATH}")
    return "".join(init_diff) + "".join(module_diff)


# ------------------------------------------------------------------------------ where init.py is


def installed_init_path() -> Path:
    """torch/nn/init.py of the torch this Python would import (found without importing it)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("no torch is installed")
    return Path(next(iter(spec.submodule_search_locations))) / "nn" / "init.py"


def wheel_init(wheel: Path) -> str:
    """torch/nn/init.py as a torch wheel holds it."""
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(INIT_PATH).decode("utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--installed", action="store_true",
                        help="the installed torch's torch/nn/init.py (the default)")
    source.add_argument("--wheel", type=Path, help="a torch wheel (.whl): its torch/nn/init.py")
    source.add_argument("--init", type=Path, help="a torch/nn/init.py file")
    parser.add_argument("-o", "--output", type=Path, help="write the patch here (default: stdout)")
    args = parser.parse_args(argv)
    if args.wheel:
        where, original = str(args.wheel), wheel_init(args.wheel)
    else:
        path = args.init or installed_init_path()
        where, original = str(path), path.read_text(encoding="utf-8")
    try:
        text = patch_text(original)
    except LayoutError as err:
        print(f"{where}: {err}", file=sys.stderr)
        return 1
    if args.output:
        args.output.write_text(text)
    else:
        sys.stdout.write(text)
    digest = hashlib.sha256(original.encode("utf-8")).hexdigest()
    print(f"against {where} (sha256 {digest[:16]}): {text.count(chr(10))} lines",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
