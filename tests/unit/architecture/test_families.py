"""A statistic family is one module: outside `harness.families`, only the registry
(`harness.checks.registry`, which lists its checks in CHECKS) imports it, so that a new statistic
is one new module and one registry entry. The few other readers are listed in `READERS`, each
with its reason; a listed reader that no longer imports its family fails the test too.

Read by the syntax tree (`ast`) over every module of `harness` outside `harness/families`.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FAMILIES = ROOT / "harness" / "families"
REGISTRY = "harness/checks/registry.py"
#: Modules other than the registry that import a family, and why: {(module, family): why}.
READERS = {
    ("harness/figure_data.py", "binned"): "a failing group's figure draws the binned histogram "
    "(`binned.histogram`) over the law's bins",
    ("harness/figure_data.py", "support"): "its title states the non-finite, unwritten and "
    "outside values (`support.support_counts`)",
    ("harness/figure_data.py", "atoms"): "it keeps the counts at RN(a) and RN(b) "
    "(`atoms.atom_counts`)",
    ("harness/checks/hard.py", "support"): "the hard checks finite, written and bounds are "
    "declared with the other hard checks, and read the support family's state",
    ("harness/checks/sharded.py", "binned"): "the sharded checks are declared in their own "
    "registry module: shards folds the binned family (the output's marginal)",
    ("harness/checks/sharded.py", "atoms"): "shards also folds the atoms family",
    ("harness/checks/sharded.py", "resolution"): "and the resolution family, whose equal pairs "
    "give the collision rate of the output's own marginal above 16 bits",
    ("harness/checks/sharded.py", "independence"): "shards' expected rates of equal "
    "elements are the independence family's collision rates, and its MDE theirs",
    ("harness/sharded/part_fold.py", "independence"): "a part's fold keeps the independence "
    "family's lag sums between shards (ShardingStats.corr)",
    ("harness/runner/case_runner.py", "localized"): "stage 2 watches the bins stage 1 flagged "
    "(spike_watch), which only the localized family can name",
    ("harness/diagnosis/mechanisms/bound_atoms.py", "atoms"):
        "the bound-atom mechanisms (rounds-first, clamp, coarse-uniform, exact-zeros) test their "
        "predicted atoms against the atoms state",
    ("harness/diagnosis/mechanisms/bound_atoms.py", "resolution"):
        "coarse-uniform's k is read from the resolution family's lattice counts",
    ("harness/diagnosis/mechanisms/clamp_points.py", "binned"):
        "a clamp inside the support predicts the clamped histogram over the binned family's "
        "values (exact_values)",
    ("harness/diagnosis/mechanisms/clamp_points.py", "resolution"):
        "and tests the clamped law's equal pairs, lattices and last bits (pair_law, low_bit_law)",
    ("harness/diagnosis/mechanisms/dependence.py", "independence"):
        "dependence reads the correlation sums",
    ("harness/diagnosis/mechanisms/dependence.py", "repetition"):
        "dependence reads repeated calls and rows",
    ("harness/diagnosis/evidence.py", "binned"): "the evidence of every mechanism starts from the "
    "binned histogram against the law",
    ("harness/diagnosis/evidence.py", "moments"): "and from the moments' power sums",
    ("harness/diagnosis/evidence.py", "independence"): "the catalog reads the independence, "
    "repetition and position states from the stage that judged their checks (OWN_STAGE_FAMILIES)",
    ("harness/diagnosis/evidence.py", "repetition"): "(OWN_STAGE_FAMILIES)",
    ("harness/diagnosis/evidence.py", "position"): "(OWN_STAGE_FAMILIES)",
    ("harness/diagnosis/mechanisms/fine_structure.py", "resolution"):
        "few-random-bits and dtype-arithmetic predict the collision rate and the low-bit classes "
        "the resolution family counts",
    ("harness/diagnosis/mechanisms/law_shape.py", "binned"):
        "shifted, scaled and tail-cut fit the histogram",
    ("harness/diagnosis/mechanisms/law_shape.py", "moments"): "and read the moments' power sums",
    ("harness/diagnosis/mechanism_catalog.py", "binned"):
        "explain ranks a match whose law fits the histogram (it explains gof) before one on the "
        "atoms alone",
    ("harness/diagnosis/mechanisms/repeated_shards.py", "independence"):
        "repeated-shards names the independence check, whose rows repeat across a shard boundary",
    ("harness/diagnosis/mechanisms/dependence.py", "position"):
        "repeated rows inflate the position check's counts too, which dependence then explains",
    ("harness/diagnosis/mechanisms/misplaced.py", "localized"):
        "point-mass and hole read the finest exact bins and the spikes and scan outcomes",
    ("harness/diagnosis/mechanisms/misplaced.py", "resolution"):
        "point-mass predicts the equal pairs and the lattice counts of its mixture",
    ("harness/diagnosis/mechanisms/position_class.py", "position"):
        "position-class fits the rest of the tensor, without the departing class, to the law",
    ("harness/diagnosis/mechanisms/coarse_construction.py", "resolution"):
        "coarse-construction predicts the equal pairs, the lattice counts and the last bits of "
        "its enumerated law",
    ("harness/diagnosis/mechanisms/coarse_construction.py", "localized"):
        "and fits its law to the mass bins, where the scan (like the tails) departing is what "
        "calls for it",
    ("harness/diagnosis/mechanisms/coarse_construction.py", "tails"):
        "a window moved by a fraction of a bin departs in the tails before the histogram: one of "
        "its departure events",
    ("harness/diagnosis/mechanisms/coarse_construction.py", "binned"):
        "and names the gof check its histogram's departure stands for",
    ("harness/diagnosis/mechanisms/coarse_construction.py", "independence"):
        "and names the independence check its equal successive elements stand for",
    ("harness/diagnosis/mechanisms/value_law.py", "resolution"):
        "a law given value by value predicts the equal pairs, the lattice counts and the last bits",
    ("harness/diagnosis/mechanisms/value_law.py", "localized"):
        "and the mass bins",
    ("harness/diagnosis/mechanisms/value_law.py", "independence"):
        "and the equal successive elements",
    ("harness/diagnosis/grading/effects.py", "moments"): "the effect figures: the mean and "
    "std off read the moments family's exact sums",
    ("harness/diagnosis/grading/effects.py", "support"): "and the values off the support or "
    "not finite, which the support family counts",
    ("harness/diagnosis/grading/effects.py", "independence"): "and the dependence strength: "
    "the lag correlations and the equal successive elements",
    ("harness/diagnosis/grading/effects.py", "repetition"): "and the repeated windows",
    ("harness/diagnosis/grading/effects.py", "resolution"): "and the equal values, whose "
    "expected share is the output's own marginal's",
}


def family_names() -> set[str]:
    return {p.stem for p in FAMILIES.glob("*.py")} - {"__init__", "common"}


def imported_families(path: Path) -> set[str]:
    """The families a module of harness imports, by any spelling of the import."""
    tree = ast.parse(path.read_text())
    rel = path.relative_to(ROOT).parts
    package = ".".join(rel[:-1])
    names = family_names()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module == "harness.families":
                found |= {a.name for a in node.names if a.name in names}
            elif module.startswith("harness.families."):
                found.add(module.split(".")[2])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("harness.families."):
                    found.add(alias.name.split(".")[2])
    return found & names


def readers() -> dict:
    """{(module, family)} for every module of harness outside the families that imports one."""
    out = set()
    for path in sorted((ROOT / "harness").rglob("*.py")):
        if FAMILIES in path.parents:
            continue
        where = str(path.relative_to(ROOT))
        out |= {(where, family) for family in imported_families(path)}
    return out


def test_only_the_registry_and_the_listed_readers_import_a_family():
    found = readers()
    unlisted = sorted(pair for pair in found if pair[0] != REGISTRY and pair not in READERS)
    assert not unlisted, f"modules that import a family without a reason in READERS: {unlisted}"


def test_every_listed_reader_still_reads_its_family():
    stale = sorted(set(READERS) - readers())
    assert not stale, f"READERS lists imports that no module makes any more: {stale}"


def test_every_family_is_read_by_a_registry():
    registries = {REGISTRY, "harness/checks/hard.py", "harness/checks/sharded.py"}
    listed = {family for where, family in readers() if where in registries}
    assert listed == family_names(), f"families no registry lists: {family_names() - listed}"


def test_the_reader_finder_sees_every_spelling(tmp_path):
    (tmp_path / "harness" / "runner").mkdir(parents=True)
    module = tmp_path / "harness" / "runner" / "probe.py"
    module.write_text("from ..families import binned, position\n"
                      "from harness.families.atoms import FAMILY\n"
                      "import harness.families.tails\n"
                      "from ..families.common import quiet\n")
    tree_root = ROOT
    try:
        globals()["ROOT"] = tmp_path
        assert imported_families(module) == {"binned", "position", "atoms", "tails"}
    finally:
        globals()["ROOT"] = tree_root


# ------------------------------------------------------------------------------------------------
# The contract a family keeps: `harness.engine.family`'s protocols, and one MDE signature.


def family_modules() -> dict:
    """{name: module} of every family module."""
    import importlib

    return {name: importlib.import_module(f"harness.families.{name}") for name in family_names()}


def defined_classes(module) -> list:
    import inspect

    return [c for _, c in inspect.getmembers(module, inspect.isclass)
            if c.__module__ == module.__name__]


def parameters(function) -> list[str]:
    """The names of the parameters a call must or may pass by position (self and cls bound)."""
    import inspect

    return [p.name for p in inspect.signature(function).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def test_every_family_keeps_the_protocols():
    """Each FAMILY is a `Family` whose init takes (law, shape, fold); each accumulator class
    (one with ``finish``) is an `Accumulator`, with fold(chunk) and finish(whole); each state
    class (one with ``merge``) is a `FamilyState`, merge a class method of (parts, whole)."""
    import inspect

    from harness.engine import Accumulator, Family, FamilyState

    broken = []
    for name, module in family_modules().items():
        family = getattr(module, "FAMILY", None)
        if family is not None:
            if not isinstance(family, Family) or family.name != name:
                broken.append(f"{name}.FAMILY is not the Family {name!r}")
            elif parameters(family.init)[-3:] != ["law", "shape", "fold"]:
                broken.append(f"{name}: FAMILY.init takes {parameters(family.init)}")
        for cls in defined_classes(module):
            if "finish" in vars(cls) or any("finish" in vars(b) for b in cls.__mro__[1:-1]):
                if not issubclass(cls, Accumulator):
                    broken.append(f"{name}.{cls.__name__}: not an Accumulator")
                elif (parameters(cls.fold)[1:], parameters(cls.finish)[1:]) != (["chunk"], ["whole"]):
                    broken.append(f"{name}.{cls.__name__}: fold{parameters(cls.fold)[1:]}, "
                                  f"finish{parameters(cls.finish)[1:]}")
            if "merge" in vars(cls):
                if not isinstance(inspect.getattr_static(cls, "merge"), classmethod):
                    broken.append(f"{name}.{cls.__name__}.merge: not a class method")
                elif not issubclass(cls, FamilyState) or parameters(cls.merge) != ["parts", "whole"]:
                    broken.append(f"{name}.{cls.__name__}.merge{parameters(cls.merge)}")
    assert not broken, "\n".join(broken)


def test_every_state_a_fold_leaves_is_a_family_state():
    """The states of a real fold (every family of every group kind) are `FamilyState`s, filed
    under their family's name."""
    import torch

    from harness.checks import CHECKS, summarize_samples
    from harness.engine import FamilyState
    from reference import TruncatedNormal, rounded_law

    law = rounded_law(TruncatedNormal(0.0, 1.0, -2.0, 2.0), torch.float32)  # every family folds
    x = torch.randn(4, 64, 64, generator=torch.Generator().manual_seed(1)).clamp(-2, 2)
    summary = summarize_samples(x, law, kind="grid")
    folded = {f.name for f in CHECKS.families("grid")}
    assert set(summary.states) == folded
    assert all(isinstance(state, FamilyState) for state in summary.states.values())


def test_every_mde_has_the_one_signature():
    """Every check that states an MDE states it as ``mde(law, n, shape, alpha)``: a named
    function, never an adapter, whatever of the four it reads."""
    from harness.checks import CHECKS

    broken = [f"{c.name}: {getattr(c.mde, '__name__', c.mde)}{parameters(c.mde)}"
              for c in CHECKS if c.mde is not None
              and (parameters(c.mde)[:4] != ["law", "n", "shape", "alpha"]
                   or c.mde.__name__ == "<lambda>")]
    assert not broken, "\n".join(broken)


def test_reports_read_no_family_state():
    """The report reads plain data: no module of reports names a family's state by attribute
    (``summary.binned``, ``.states``); what a figure needs comes from `harness.figure_data`."""
    names = family_names() | {"states"}
    found = []
    for path in sorted((ROOT / "reports").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in names:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    assert not found, "\n".join(found)
