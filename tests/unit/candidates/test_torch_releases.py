"""torch's release history, as the docs state it, held to code read out of the wheels.

* ``torch-legacy`` gives torch 2.11.0's ``_no_grad_trunc_normal_`` output bit for bit, in every
  dtype, for the same generator (the fixture `torch_init_2_11_0` is that function, verbatim);
* an installed torch of a release read to hold 2.12.0's rewrite holds its text, verbatim
  (`torch_init_2_12_0`), so the findings measured on it are about that code;
* every version statement of the docs, the candidates and the examples about the old algorithm
  names `LEGACY_LAST_RELEASE`'s minor release, and every one about the rewrite
  `REWRITE_FIRST_RELEASE`'s.
"""

from __future__ import annotations

import inspect
import math
import re
import warnings
from pathlib import Path

import pytest
import torch
import torch_init_2_11_0
import torch_init_2_12_0

from candidates import REGISTRY
from candidates.builtin import LEGACY_LAST_RELEASE, REWRITE_FIRST_RELEASE
from harness.session.xfails import release_of

ROOT = Path(__file__).resolve().parents[3]

#: Releases whose wheel's torch/nn/init.py was read and holds 2.12.0's ``_no_grad_trunc_normal_``
#: verbatim (2.12.1 and 2.14.0 were not read).
REWRITE_TEXT_RELEASES = ("2.12.0", "2.13.0", "2.14.1")

DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
        torch.bfloat16: torch.int16}
#: (mean, std, a, b): the bf16 trap (±100σ), the default, a tail, a one-sided and an off-centre
#: window, the two branches of the mean warning.
LEGACY_CASES = [(0.0, 0.02, -2.0, 2.0), (0.0, 1.0, -2.0, 2.0), (0.0, 1.0, 3.0, 10.0),
                (0.0, 1.0, 5.0, math.inf), (3.0, 0.5, 1.0, 3.0), (10.0, 1.0, -2.0, 2.0)]


def _minor(release: str) -> str:
    return ".".join(release.split(".")[:2])


def _draw(fn, dtype, params, seed=20260101, shape=(257, 64), view=False):
    base = torch.empty(shape[::-1] if view else shape, dtype=dtype)
    tensor = base.t() if view else base
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(tensor, *params, generator=torch.Generator().manual_seed(seed))
    assert out is tensor
    return tensor.contiguous().view(BITS[dtype]), [str(w.message) for w in caught]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("params", LEGACY_CASES, ids=str)
def test_torch_legacy_is_torch_2_11_0_bit_for_bit(dtype, params):
    legacy = REGISTRY["torch-legacy"]()
    for view in (False, True):
        got, got_warnings = _draw(legacy, dtype, params, view=view)
        want, want_warnings = _draw(torch_init_2_11_0._no_grad_trunc_normal_, dtype, params,
                                    view=view)
        assert torch.equal(got, want), f"{dtype} {params}: torch-legacy differs from 2.11.0"
        assert got_warnings == want_warnings


def test_the_comparison_can_fail():
    """2.11.0's code and the rewrite differ on the trap in bf16: the bit comparison sees it."""
    params = LEGACY_CASES[0]
    old, _ = _draw(torch_init_2_11_0._no_grad_trunc_normal_, torch.bfloat16, params)
    new, _ = _draw(torch_init_2_12_0._no_grad_trunc_normal_, torch.bfloat16, params)
    assert not torch.equal(old, new)


def test_the_fixtures_are_the_releases_the_constants_name():
    assert "torch 2.11.0's" in torch_init_2_11_0.__doc__ and LEGACY_LAST_RELEASE == "2.11.0"
    assert "torch 2.12.0's" in torch_init_2_12_0.__doc__ and REWRITE_FIRST_RELEASE == "2.12.0"
    assert REWRITE_TEXT_RELEASES[0] == REWRITE_FIRST_RELEASE


def test_the_installed_torch_holds_the_code_its_release_is_said_to():
    release = release_of(torch.__version__)
    installed = inspect.getsource(torch.nn.init._no_grad_trunc_normal_)
    if release in REWRITE_TEXT_RELEASES:
        assert installed == inspect.getsource(torch_init_2_12_0._no_grad_trunc_normal_)
    elif release == LEGACY_LAST_RELEASE:
        assert installed == inspect.getsource(torch_init_2_11_0._no_grad_trunc_normal_)
    else:
        pytest.skip(f"torch {release}: its torch/nn/init.py was not read")


# ------------------------------------------------------------------------ the docs' statements

#: Statements that the old algorithm lasted up to a release: "torch ≤ 2.11", "up to torch 2.11",
#: "pre-2.12 torch", "the 2.11 bug" (the release's own bug). The release named is the old
#: algorithm's last, except after "pre-", where it is the rewrite's.
RELEASE = r"(?P<release>2\.\d+(?:\.\d+)?)(?![\d×x])"
LEGACY_STATEMENTS = (
    re.compile(r"torch(?:'s)?\s+(?P<word>≤|<=)\s*" + RELEASE),
    re.compile(r"(?P<word>≤|<=)\s*" + RELEASE + r"(?:'s)?\s+(?:torch\s+)?algorithm"),
    re.compile(r"(?P<word>[Uu]p to|[Uu]ntil)\s+(?:torch\s+)?" + RELEASE),
    re.compile(r"(?P<word>pre-)" + RELEASE + r"\s+torch"),
    re.compile(r"(?P<word>[Tt]he) " + RELEASE + r" bug"),
)
#: A statement that a release brought the rewrite ("torch 2.12's rewrite", "2.12.0 replaced").
REWRITE_STATEMENT = re.compile(
    r"(?:torch\s+)?(2\.\d+(?:\.\d+)?)(?:'s rewrite| replaced the inverse| rewrote)")
#: Where the statements are: the docs, the candidates' docstrings and defects, the examples.
STATED_IN = ("README.md", "docs", "candidates", "examples", "xfails", "benchmarks", "tests")
#: Statements about other software than torch that the patterns would read as torch's.
NOT_TORCH = re.compile(r"(numpy|jax|mlx|pytest|keras|timm|scipy|pandas|Python)\s*$", re.I)


def _stated_files() -> list[Path]:
    paths = []
    for name in STATED_IN:
        path = ROOT / name
        paths += [path] if path.is_file() else sorted(
            p for p in path.rglob("*") if p.suffix in (".md", ".py", ".txt"))
    return [p for p in paths if p != Path(__file__).resolve()]  # its own examples are wrong


def _statements(patterns, paths):
    """(where, match, line) of each statement of `patterns` about torch in `paths`."""
    for path in paths:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in (m for pattern in patterns for m in pattern.finditer(line)):
                if NOT_TORCH.search(line[:m.start()]):
                    continue
                if patterns is LEGACY_STATEMENTS and not re.search("torch|algorithm|bug", line):
                    continue  # "up to 2.5" of something else
                shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                yield f"{shown}:{lineno}", m, line


def misdated_legacy(paths) -> list[str]:
    """Statements that the old algorithm lasted up to another release than it did."""
    wrong, seen = [], set()
    for where, m, line in _statements(LEGACY_STATEMENTS, paths):
        word, named = m.group("word"), m.group("release")
        if (where, m.start("release")) in seen:  # two patterns reading one statement
            continue
        seen.add((where, m.start("release")))
        expected = REWRITE_FIRST_RELEASE if word == "pre-" else LEGACY_LAST_RELEASE
        if _minor(named) != _minor(expected):
            wrong.append(f"{where}: {word} {named} (torch {LEGACY_LAST_RELEASE} is the last "
                         f"with the inverse CDF): {line.strip()}")
    return wrong


def misdated_rewrite(paths) -> list[str]:
    """Statements that another release than the one that did brought the rewrite."""
    return [f"{where}: {m.group(1)} (the rewrite is {REWRITE_FIRST_RELEASE}'s): {line.strip()}"
            for where, m, line in _statements((REWRITE_STATEMENT,), paths)
            if _minor(m.group(1)) != _minor(REWRITE_FIRST_RELEASE)]


def test_the_docs_date_the_old_algorithm_to_the_last_release_that_has_it():
    wrong = misdated_legacy(_stated_files())
    assert not wrong, "\n".join(wrong)


def test_the_docs_date_the_rewrite_to_the_release_that_brought_it():
    wrong = misdated_rewrite(_stated_files())
    assert not wrong, "\n".join(wrong)


def test_the_docs_make_the_statements_the_tests_read():
    """The checks above read something: the README and the candidates state both releases."""
    paths = _stated_files()
    legacy = {where.split(":")[0] for where, _, _ in _statements(LEGACY_STATEMENTS, paths)}
    rewrite = {where.split(":")[0] for where, _, _ in _statements((REWRITE_STATEMENT,), paths)}
    assert {"README.md", "candidates/builtin.py"} <= legacy
    assert "README.md" in rewrite


def test_a_wrong_date_is_caught_and_a_right_one_is_not(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("up to torch 2.12, trunc_normal_ in bfloat16\n"
                    "timm keeps torch ≤ 2.12's algorithm\n"
                    "the pre-2.13 torch code\n"
                    "torch 2.13's rewrite has its own defects\n"
                    "The 2.12 bug is gone\n"
                    "up to torch 2.11 the bug; torch ≤ 2.11's algorithm; pre-2.12 torch\n"
                    "torch 2.12's rewrite; numpy ≤ 2.4 is fine; the 2.11 bug; <= 2.0x torch\n",
                    encoding="utf-8")
    assert [w.split(":")[1] for w in misdated_legacy([page])] == ["1", "2", "3", "5"]
    assert [w.split(":")[1] for w in misdated_rewrite([page])] == ["4"]
