"""The thresholds of harm: the defaults, the option's text and the API's dict over them, and the
errors a bad key or value gives (one line naming it), on the command line as in harness.check."""

from __future__ import annotations

import math

import pytest

from harness.diagnosis import DEFAULT_THRESHOLDS, HarmThresholds, ThresholdsError, parse_thresholds
from harness.diagnosis.grading.thresholds import KEYS
from harness.session.options import OptionError, option_defaults, parse_options
from reference.dtypes import DTYPES


def test_defaults_and_their_text_round_trip():
    t = DEFAULT_THRESHOLDS
    assert t.moved_at(0.5) == 0.03 and t.moved_at(0.25) == 0.10 and t.tail_at(64) == 1e-5
    assert (t.mean, t.std, t.w1, t.far, t.r, t.repeats) == (0.01, 0.02, 0.02, 1.0, 0.01, 1e-3)
    assert parse_thresholds(t.text()) == t
    assert tuple(t.as_dict()) == KEYS


def test_text_and_dict_change_only_what_they_name():
    t = parse_thresholds("moved@0.5=0.05, tail@10=2e-4,mean=0.02")
    assert t.moved_at(0.5) == 0.05 and t.tail_at(10) == 2e-4 and t.mean == 0.02
    assert t.moved_at(1) == DEFAULT_THRESHOLDS.moved_at(1) and t.std == DEFAULT_THRESHOLDS.std
    assert parse_thresholds({"moved@.5": 0.05, "TAIL@10": "2e-4", "mean": 0.02}) == t
    assert parse_thresholds("std=inf").std == math.inf
    assert parse_thresholds(None) == parse_thresholds("") == DEFAULT_THRESHOLDS
    assert isinstance(parse_thresholds(t), HarmThresholds) and parse_thresholds(t) == t


@pytest.mark.parametrize("text,words", [
    ("moved@3=0.1", "unknown threshold 'moved@3'; known: moved@0.25"),
    ("median=0.1", "unknown threshold 'median'"),
    ("mean", "expected key=value"),
    ("mean=abc", "mean: expected a number"),
    ("mean=-1", "mean: must be a number >= 0"),
    ("mean=nan", "mean: must be a number >= 0"),
])
def test_bad_text_is_one_clear_line(text, words):
    with pytest.raises(ThresholdsError, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse_thresholds(text)


def _options(**given):
    values = dict(option_defaults(tuple(DTYPES)), **given)
    return parse_options(values, tuple(DTYPES), environ={})


def test_the_option_reaches_the_options_and_names_itself_in_errors():
    assert _options().harm_thresholds == DEFAULT_THRESHOLDS
    assert _options(harm_thresholds="w1=0.05").harm_thresholds.w1 == 0.05
    assert _options(harm_thresholds={"r": 0.05}).harm_thresholds.r == 0.05
    with pytest.raises(OptionError, match=r"^--harm-thresholds: unknown threshold 'bogus'"):
        _options(harm_thresholds="bogus=1")
