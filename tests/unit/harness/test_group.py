"""Case groups (`harness.group`) over the whole grid: every case at every shape class and path,
the run's own cases (``--case``, the explorer), every dtype, cpu and cuda:0, every layout. Each
group's id and case label read back (`record.ids`) into what the group is made of, are the
strings the harness has always written (rows, node ids, xfails lines and reproduce lines do not
change), and a case id or a pair of candidates that would make two groups share a name is
refused when the run is set up."""

from __future__ import annotations

import pytest

from candidates import resolve
from candidates.catalog import REGISTRY, SELFTEST_REGISTRY, SHARDED_REGISTRY
from harness.cases import GRID, PATHS, SHAPES, case_by_label, on_path, parse_case_spec, shaped
from harness.explore import explored_cases
from harness.fleet.group_ledger import conformance_nodeid, group_of_nodeid, nodeid_parts
from harness.fleet.scheduling import cuda_index_of_group
from harness.group import ApiGroup, Group, api_group_names, group_names, id_clash
from harness.session.options import OptionError
from harness.session.planner import plan_run
from harness.session.run_plan import named
from harness.sharded.layout import PLACEMENTS, RANK_SEEDS, Layout
from record.ids import API_CASE, CaseLabel, group_device, parse_case_label, parse_group_id
from reference.dtypes import DTYPES, dtype_name

DEVICES = ("cpu", "cuda:0")
LAYOUTS = [Layout(w, p, r) for w in (2, 4) for p in PLACEMENTS for r in RANK_SEEDS]
#: Every registered candidate name: ``exact`` and ``exact-counter`` among them, so an id is
#: split between candidate and case knowing names that begin one another.
ALL_NAMES = sorted({*REGISTRY, *SELFTEST_REGISTRY, *SHARDED_REGISTRY})
USER_CASES = (parse_case_spec("std=1,a=-1,b=1,id=my-embed.v2_x"), parse_case_spec("std=1,a=-1,b=1"),
              *explored_cases(2, 7))
BASES = (*GRID, *USER_CASES)
CASE_IDS = [c.id for c in BASES]


def every_case():
    """Each base case, at each shape class, on each path, and at a shape class on a path."""
    for base in BASES:
        yield base
        yield from (shaped(base, s) for s in SHAPES)
        yield from (on_path(base, p) for p in PATHS if p != "eager")
        yield on_path(shaped(base, SHAPES[-1]), "compile")


def old_group_id(candidate, case, dtype, device, layout=None) -> str:
    """The id as the harness wrote it before `record.ids` existed."""
    base = f"{candidate.name}-{case.id}-{dtype_name(dtype)}-{device}"
    return base if layout is None else f"{base}-{layout.label}"


def group(candidate, case, dtype, device, layout=None) -> Group:
    return Group(candidate, case, dtype, device, layout,
                 **group_names(candidate.name, case, dtype, device, layout))


def test_a_case_is_named_by_its_label_and_rebuilt_from_it():
    by_id = {c.id: c for c in USER_CASES}
    for case in every_case():
        label = case.label
        assert (label.shape, label.path) == (case.shape_class, case.path)
        assert label.case in by_id or label.case in {c.id for c in GRID}
        assert str(label) == case.id and parse_case_label(case.id) == label
        assert case_by_label(case.id, by_id) == case


def test_every_group_reads_back_and_keeps_its_id():
    candidates = [resolve("torch"), resolve("exact")]
    groups = [group(cand, case, DTYPES[d], device) for cand in candidates
              for case in every_case() for d in DTYPES for device in DEVICES]
    groups += [group(cand, case, DTYPES[d], device, layout) for cand in candidates
               for case in BASES for d in DTYPES for device in DEVICES for layout in LAYOUTS]
    for g in groups:
        assert g.id == old_group_id(g.candidate, g.case, g.dtype, g.device, g.layout)
        assert g.case_label == (g.case.id if g.layout is None else f"{g.case.id}@{g.layout.label}")
        layout = g.layout.label if g.layout is not None else ""
        assert g.label == CaseLabel(g.case.label.case, g.case.shape_class, g.case.path, layout)
        assert parse_case_label(g.case_label) == g.label
        parsed = parse_group_id(g.id, ALL_NAMES, CASE_IDS)
        assert parsed == g.group_id
        assert (parsed.candidate, parsed.dtype, parsed.device) == \
            (g.candidate.name, dtype_name(g.dtype), g.device)
        assert group_device(g.id) == g.device
        assert cuda_index_of_group(g.id) == (0 if g.device == "cuda:0" else None)
        nodeid = conformance_nodeid("gof", g.id)
        assert nodeid_parts(nodeid) == ("gof", g.id) and group_of_nodeid(nodeid) == g.id
        assert group_of_nodeid(nodeid + "@xdist-group") == g.id
    assert id_clash(named(groups, ())) is None
    assert len({g.id for g in groups}) == len(set(groups))


def test_every_api_group_reads_back_and_keeps_its_id():
    for name in ("torch", "exact", "exact-counter", "torch-legacy"):
        candidate = resolve(name)
        for d in DTYPES:
            for device in DEVICES:
                g = ApiGroup(candidate, DTYPES[d], device,
                             **api_group_names(name, DTYPES[d], device))
                assert g.id == f"{name}-{d}-{device}" and g.case_label == API_CASE
                assert parse_group_id(g.id, ALL_NAMES, CASE_IDS) == g.group_id
                assert g.group_id.case is None


@pytest.mark.parametrize("case_id", ["a:b", "a+compile", "a@w2-shard0", "a b"])
def test_a_case_id_the_labels_could_not_name_is_refused(parse, case_id):
    with pytest.raises(OptionError) as info:
        parse(case=[f"std=1,a=-1,b=1,id={case_id}"])
    message = str(info.value)
    assert "may hold letters, digits, '_', '.', '-' only" in message and "\n" not in message


def test_two_groups_of_one_name_are_refused_when_the_run_is_set_up(parse):
    opt = parse(candidate=["exact", "exact-counter"],
                case=["std=1,a=-1,b=1,id=counter-x", "std=1,a=-1,b=2,id=x"], dtypes="float32",
                devices="cpu")
    with pytest.raises(OptionError) as info:
        plan_run(opt)
    message = str(info.value)
    assert message.startswith("group id 'exact-counter-x-float32-cpu' would name two groups")
    assert "exact on counter-x and exact-counter on x" in message and "\n" not in message
    alone = parse(candidate=["exact", "exact-counter"], case=["std=1,a=-1,b=1,id=x"],
                  dtypes="float32", devices="cpu")
    plan_run(alone)  # one of them alone is fine
