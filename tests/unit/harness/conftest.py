"""Fixtures of the harness's unit tests.

* `parse`: ``parse(environ=None, **given)`` runs `harness.session.options.parse_options` on the raw
  values pytest would hand it: the defaults `harness.session.options.add_options` registers, with
  ``given`` (dest name -> raw value) over them, and ``environ`` (empty unless given) as the
  environment.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.seeds import DEFAULT_RUN_SEED
from harness.session.options import add_options, parse_options
from reference.dtypes import DTYPES


class _Recorder:
    """Stands in for pytest's parser: records each option's default under its dest name."""

    def __init__(self):
        self.defaults = {}

    def getgroup(self, *args, **kwargs):
        return self

    def addoption(self, *names, **kwargs):
        self.defaults[names[0].lstrip("-").replace("-", "_")] = kwargs.get("default")


def _parse(environ=None, **given):
    recorder = _Recorder()
    add_options(recorder, DEFAULT_RUN_SEED, tuple(DTYPES))
    # an empty environment unless given: a CI's partition variables must not leak into these tests
    return parse_options(SimpleNamespace(**(recorder.defaults | given)), tuple(DTYPES),
                         environ=environ or {})


@pytest.fixture
def parse():
    return _parse
