"""The plugin's own hooks, called directly on pytest's objects."""

from __future__ import annotations

import types

from pytest import ExceptionInfo

from harness.plugin import pytest_keyboard_interrupt


def _interrupt() -> None:
    raise KeyboardInterrupt


def test_a_ctrl_c_on_an_instruction_without_a_line_number_is_still_reported():
    """A KeyboardInterrupt whose traceback holds an entry with tb_lineno None (an instruction
    without a line mapping, seen once in CI in the xdist controller) made pytest's report of it
    raise TypeError, and the run exit 1 instead of 2."""
    try:
        _interrupt()
    except KeyboardInterrupt as exc:
        tb = exc.__traceback__
    nowhere = types.TracebackType(tb.tb_next, tb.tb_next.tb_frame, 1 << 20, -1)
    assert nowhere.tb_lineno is None
    raw = types.TracebackType(nowhere, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
    excinfo = ExceptionInfo.from_exc_info((KeyboardInterrupt, KeyboardInterrupt(), raw))
    pytest_keyboard_interrupt(excinfo)
    assert "KeyboardInterrupt" in str(excinfo.getrepr(funcargs=True))
