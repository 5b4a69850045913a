"""The names of groups and cases (`record.ids`): each parse reads back what its format wrote, for
any case id, shape class name, path, layout, candidate name, dtype and device the grammar allows,
and refuses what the format could not name unambiguously."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from record import ids
from record.ids import (API_CASE, CASE_ID_CHARS, CaseLabel, GroupId, format_case_label,
                        format_group_id, group_device, is_case_id, parse_case_label,
                        parse_group_id)
from reference.dtypes import DTYPES
from reports.overview import base_case

case_ids = st.text(alphabet=sorted(CASE_ID_CHARS), min_size=1, max_size=24)
# Shape class names as the shape axis writes them ("61x67", "64x3x7x7-cl", "2^31+1"), and any
# other text without ':' or '@'.
shape_names = st.one_of(
    st.just(""),
    st.from_regex(r"[0-9]+(x[0-9]+)*(-cl)?", fullmatch=True),
    st.from_regex(r"2\^[0-9]+(\+[0-9]+)?", fullmatch=True),
    st.text(alphabet=st.characters(blacklist_characters=":@", blacklist_categories=("Cs",)),
            min_size=1, max_size=12))
paths = st.one_of(st.sampled_from(["eager", "compile", "deterministic"]),
                  st.from_regex(r"[a-z]{1,10}", fullmatch=True))
layouts = st.one_of(st.just(""), st.from_regex(r"w[0-9]{1,2}-(shard[0-9]|replicate)(-perrank)?",
                                               fullmatch=True))
devices = st.one_of(st.sampled_from(["cpu", "cuda", "cuda:0", "cuda:7", "mps"]),
                    st.from_regex(r"[a-z_]{1,8}(:[0-9]{1,2})?", fullmatch=True))
candidate_names = st.text(min_size=1, max_size=20).filter(lambda s: "\x00" not in s)


def _namable_shape(shape: str) -> bool:
    """The grammar's one rule on shape names beyond their characters: no trailing ``+word``,
    which would read as the path."""
    return re.search(r"\+[a-z]+\Z", shape) is None


@settings(max_examples=100, deadline=None)
@given(case_ids, shape_names, paths, layouts)
def test_a_case_label_reads_back(case, shape, path, layout):
    label = CaseLabel(case, shape, path, layout)
    if not _namable_shape(shape):
        with pytest.raises(ValueError, match="unambiguously"):
            format_case_label(label)
        return
    text = format_case_label(label)
    assert parse_case_label(text) == label
    assert base_case(text) == case


@settings(max_examples=100, deadline=None)
@given(candidate_names, st.one_of(st.none(), st.builds(CaseLabel, case_ids, shape_names, paths,
                                                        layouts)),
       st.sampled_from(sorted(DTYPES)), devices)
def test_a_group_id_reads_back(candidate, case, dtype, device):
    if case is not None and not _namable_shape(case.shape):
        return
    group = GroupId(candidate, case, dtype, device)
    text = format_group_id(group)
    assert parse_group_id(text, [candidate]) == group
    assert group_device(text) == device
    # Other candidates whose names no id of `candidate` begins with change nothing.
    assert parse_group_id(text, [candidate, "\x00other", candidate + "\x00"]) == group


def test_the_grammar_on_examples():
    assert format_case_label(CaseLabel("normal-2sigma", "61x67", "compile")) == \
        "normal-2sigma:61x67+compile"
    assert parse_case_label("normal-2sigma:2^31+1") == CaseLabel("normal-2sigma", "2^31+1")
    assert parse_case_label("vit-pos-embed@w4-replicate-perrank") == \
        CaseLabel("vit-pos-embed", layout="w4-replicate-perrank")
    assert parse_case_label(API_CASE) == CaseLabel(API_CASE)
    group = GroupId("torch", CaseLabel("abs-bounds-trap", layout="w2-shard0"), "bfloat16", "cuda:1")
    assert format_group_id(group) == "torch-abs-bounds-trap-bfloat16-cuda:1-w2-shard0"
    assert format_group_id(GroupId("torch", None, "float32", "cpu")) == "torch-float32-cpu"


def test_what_cannot_be_named_is_refused():
    for case in ("a:b", "a+b", "a@b", "", "a b"):
        assert not is_case_id(case)
        with pytest.raises(ValueError):
            format_case_label(CaseLabel(case))
    with pytest.raises(ValueError):
        format_case_label(CaseLabel("c", "x", "Compile"))  # a path is a lowercase word
    with pytest.raises(ValueError):
        format_case_label(CaseLabel("c", layout="two-ranks"))
    with pytest.raises(ValueError):
        format_group_id(GroupId("torch", None, "float33", "cpu"))
    with pytest.raises(ValueError):
        format_group_id(GroupId("torch", None, "float32", "cuda-0"))
    for text in ("c:", "c::x", "c@", "", "c+"):
        with pytest.raises(ValueError):
            parse_case_label(text)


def test_ids_of_other_tests_are_no_groups():
    """The scheduler asks every test's parametrization id for its device: a self-test's is none."""
    for text in ("cuda:1-y", "x-cuda:1", "tests/unit/x.py::test_y", "float32-cpu", "-float32-cpu",
                 "a-w2-shard0", "torch-normal-2sigma-float32-cuda:0-w2", "x-float32-cuda-0"):
        assert group_device(text) is None, text
    with pytest.raises(ValueError, match="not a group id"):
        parse_group_id("cuda:1-y", ["torch"])


def test_a_group_id_two_candidates_name_is_refused():
    text = format_group_id(GroupId("exact", CaseLabel("counter-x"), "float32", "cpu"))
    assert text == format_group_id(GroupId("exact-counter", CaseLabel("x"), "float32", "cpu"))
    with pytest.raises(ValueError, match="each of exact, exact-counter"):
        parse_group_id(text, ["exact", "exact-counter"])
    assert parse_group_id(text, ["exact"]).case == CaseLabel("counter-x")
    with pytest.raises(ValueError, match="no group of torch"):
        parse_group_id(text, ["torch"])


def test_base_case_of_any_text():
    assert base_case("normal-2sigma:61x67+compile") == "normal-2sigma"
    assert base_case("abs-bounds-trap@w2-shard1") == "abs-bounds-trap"
    assert base_case("normal-2sigma:2^31+1") == "normal-2sigma"
    assert base_case(float("nan")) == "nan"  # a missing case in an old table


def test_a_label_is_named_from_its_parts_never_parsed_back(monkeypatch):
    """The format reads the parts a case carries; the parse is for text the harness did not
    write (the controller's node ids, the report readers, ``--cases``)."""
    def refuse(text):
        raise AssertionError(f"the format parsed {text!r}")

    monkeypatch.setattr(ids, "parse_case_label", refuse)
    label = CaseLabel("normal-2sigma", "61x67", "compile", "w2-shard0")
    assert format_case_label(label) == "normal-2sigma:61x67+compile@w2-shard0"
    assert format_group_id(GroupId("torch", label, "float32", "cpu")) == \
        "torch-normal-2sigma:61x67+compile-float32-cpu-w2-shard0"
    with pytest.raises(ValueError, match="unambiguously"):
        format_case_label(CaseLabel("c", "x+abc"))
