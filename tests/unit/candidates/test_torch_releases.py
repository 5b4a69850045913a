"""torch's release history, as the docs state it, held to the wheels and to behaviour.

* ``torch-legacy`` runs the inverse-CDF recipe torch shipped up to 2.11 bit for bit: the test
  composes the recipe from torch's ops and compares, in every dtype, for the same generator;
  where the installed torch is the legacy release, against its own function too;
* it shows that recipe's defect (the bf16 trap's atom at ``a``), which the rewrite does not have;
* an installed torch of a release read from its wheel holds the ``_no_grad_trunc_normal_`` that
  release is said to (compared by SHA-256 digest: no torch text is stored here), so the
  findings measured on it are about that code;
* every version statement of the docs, the candidates and the examples about the old algorithm
  names `LEGACY_LAST_RELEASE`'s minor release, and every one about the rewrite
  `REWRITE_FIRST_RELEASE`'s.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import re
import warnings
from pathlib import Path

import pytest
import torch

from candidates import REGISTRY
from candidates.builtin import LEGACY_LAST_RELEASE, REWRITE_FIRST_RELEASE
from harness.session.xfails import release_of

ROOT = Path(__file__).resolve().parents[3]

#: SHA-256 of ``inspect.getsource(torch.nn.init._no_grad_trunc_normal_)``, UTF-8, as the wheels
#: ship it: the inverse-CDF function of 2.11.0 (the last release with it), and the rejection
#: rewrite, identical in every release read from 2.12.0 on (2.14.0 was not read).
LEGACY_SOURCE_DIGEST = "05ee7c1fe56df9283765946cec7c9eb47ce03e23753bf6851bad051e960d9f24"
REWRITE_SOURCE_DIGEST = "209d9ea0f93513a42246806a9d13a43e00a75397bd0b73994358928f83948bf9"
SOURCE_DIGESTS = {"2.11.0": LEGACY_SOURCE_DIGEST, "2.12.0": REWRITE_SOURCE_DIGEST,
                  "2.12.1": REWRITE_SOURCE_DIGEST, "2.13.0": REWRITE_SOURCE_DIGEST,
                  "2.14.1": REWRITE_SOURCE_DIGEST, "2.15.0": REWRITE_SOURCE_DIGEST}

DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
        torch.bfloat16: torch.int16}
#: (mean, std, a, b): the bf16 trap (±100σ), the default, a tail, a one-sided and an off-centre
#: window, the two sides of the mean warning.
LEGACY_CASES = [(0.0, 0.02, -2.0, 2.0), (0.0, 1.0, -2.0, 2.0), (0.0, 1.0, 3.0, 10.0),
                (0.0, 1.0, 5.0, math.inf), (3.0, 0.5, 1.0, 3.0), (10.0, 1.0, -2.0, 2.0)]
SEED = 20260101


def _minor(release: str) -> str:
    return ".".join(release.split(".")[:2])


def _source_digest(fn) -> str:
    return hashlib.sha256(inspect.getsource(fn).encode("utf-8")).hexdigest()


def _installed_digest() -> str:
    return _source_digest(torch.nn.init._no_grad_trunc_normal_)


def _draw(fn, dtype, params, shape=(257, 64), view=False):
    """fn's output as bit patterns, and how many warnings it raised."""
    base = torch.empty(shape[::-1] if view else shape, dtype=dtype)
    tensor = base.t() if view else base
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(tensor, *params, generator=torch.Generator().manual_seed(SEED))
    assert out is tensor
    return tensor.contiguous().view(BITS[dtype]), len(caught)


def _legacy_recipe(tensor, mean, std, a, b, generator):
    """The inverse-CDF recipe, out of place: Phi of each standardized bound formed in float64,
    u uniform on [2 Phi(alpha) - 1, 2 Phi(beta) - 1) in the tensor's dtype, erfinv, times
    std sqrt 2, plus the mean, clamped to [a, b]; each step rounds into the dtype."""
    def phi(z):
        return 0.5 + 0.5 * math.erf(z / math.sqrt(2.0))

    u = torch.empty_like(tensor).uniform_(2.0 * phi((a - mean) / std) - 1.0,
                                          2.0 * phi((b - mean) / std) - 1.0, generator=generator)
    x = torch.clamp(torch.erfinv(u) * (std * math.sqrt(2.0)) + mean, min=a, max=b)
    tensor.copy_(x)
    return tensor


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("params", LEGACY_CASES, ids=str)
def test_torch_legacy_is_the_inverse_cdf_recipe_bit_for_bit(dtype, params):
    got, got_warnings = _draw(REGISTRY["torch-legacy"](), dtype, params)
    want, _ = _draw(_legacy_recipe, dtype, params)
    assert torch.equal(got, want), f"{dtype} {params}: torch-legacy is not the recipe"
    mean, std, a, b = params
    assert got_warnings == int(mean < a - 2 * std or mean > b + 2 * std)


def test_torch_legacy_is_the_legacy_release_bit_for_bit_where_that_is_installed():
    if _installed_digest() != LEGACY_SOURCE_DIGEST:
        pytest.skip(f"torch {torch.__version__} does not hold {LEGACY_LAST_RELEASE}'s function")
    legacy = REGISTRY["torch-legacy"]()
    for dtype, params, view in ((d, p, v) for d in DTYPES for p in LEGACY_CASES for v in (False, True)):
        got, got_warnings = _draw(legacy, dtype, params, view=view)
        want, want_warnings = _draw(torch.nn.init.trunc_normal_, dtype, params, view=view)
        assert torch.equal(got, want), f"{dtype} {params} view={view}: torch-legacy differs from torch"
        assert got_warnings == want_warnings


def test_torch_legacy_has_the_inverse_cdf_defect_and_the_rewrite_has_not():
    """The bf16 trap (std 0.02 on ±2): u = -1 exactly gives erfinv = -inf, clamped to a = -2, for
    ~0.2 % of the values; no value gets past ~2.7 std. The rewrite puts no value on a bound, so
    the bit comparisons above can tell the two algorithms apart."""
    params = LEGACY_CASES[0]
    old = REGISTRY["torch-legacy"]()(torch.empty(100_000, dtype=torch.bfloat16), *params,
                                     generator=torch.Generator().manual_seed(SEED)).double()
    assert 1e-3 <= (old == -2.0).double().mean() <= 4e-3
    assert old.max() < 3 * 0.02 and (old[old != -2.0].min() > -6 * 0.02)
    if _installed_digest() != REWRITE_SOURCE_DIGEST:
        pytest.skip(f"torch {torch.__version__} does not hold the rewrite")
    new = torch.nn.init.trunc_normal_(torch.empty(100_000, dtype=torch.bfloat16), *params,
                                      generator=torch.Generator().manual_seed(SEED)).double()
    assert not (new.abs() == 2.0).any() and new.abs().max() < 1.0


def test_the_digests_are_the_releases_the_constants_name():
    assert SOURCE_DIGESTS[LEGACY_LAST_RELEASE] == LEGACY_SOURCE_DIGEST
    assert SOURCE_DIGESTS[REWRITE_FIRST_RELEASE] == REWRITE_SOURCE_DIGEST != LEGACY_SOURCE_DIGEST
    rewrite_releases = sorted((r for r, d in SOURCE_DIGESTS.items() if d == REWRITE_SOURCE_DIGEST),
                              key=lambda r: tuple(map(int, r.split("."))))
    assert rewrite_releases[0] == REWRITE_FIRST_RELEASE


def test_the_installed_torch_holds_the_code_its_release_is_said_to():
    release = release_of(torch.__version__)
    if release not in SOURCE_DIGESTS:
        pytest.skip(f"torch {release}: its torch/nn/init.py was not read")
    assert _installed_digest() == SOURCE_DIGESTS[release]


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
