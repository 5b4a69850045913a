"""The plugin's own hooks, called directly on pytest's objects."""

from __future__ import annotations

import pathlib
import types

from pytest import ExceptionInfo

from harness.plugin import pytest_keyboard_interrupt

ROOT = pathlib.Path(__file__).resolve().parents[3]


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


def test_the_failure_listing_still_prints_teardown_output_and_every_report_comes_back(
        pytester, monkeypatch):
    """`SummaryScan` hands pytest's failure listing only the teardown reports it can print (it
    scans every passed setup/teardown report once per failure otherwise): what pytest prints is
    the same, and after the summary the reporter holds every report again."""
    pytester.makeconftest(
        "import pytest\n"
        "from harness.plugin.terminal import SummaryScan\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(SummaryScan(), 'scan')\n"
        "@pytest.fixture\n"
        "def noisy():\n"
        "    yield\n"
        "    print('TEARDOWN-SAYS-HELLO')\n"
        "seen = {}\n"
        "@pytest.hookimpl(trylast=True)\n"
        "def pytest_unconfigure(config):\n"
        "    tr = config.pluginmanager.get_plugin('terminalreporter')\n"
        "    with open('phase-reports.txt', 'w') as fh:\n"
        "        fh.write(str(len(tr.stats.get('', []))))\n")
    pytester.makepyfile(
        "import pytest\n"
        "@pytest.mark.parametrize('i', range(20))\n"
        "def test_pass(i):\n"
        "    pass\n"
        "def test_fails(noisy):\n"
        "    assert False\n")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=20, failed=1)
    result.stdout.fnmatch_lines(["*Captured stdout teardown*", "TEARDOWN-SAYS-HELLO"])
    # 21 setups and 21 teardowns passed, the failing test's teardown among them: all back.
    assert (pytester.path / "phase-reports.txt").read_text() == "42"


def test_summary_scan_restores_the_very_list_and_keeps_a_report_logged_meanwhile():
    from harness.plugin.terminal import summary_scan

    def report(when, sections=()):
        return types.SimpleNamespace(when=when, sections=list(sections))

    loud = report("teardown", [("Captured stdout teardown", "x")])
    phases = [report("setup"), report("teardown"), loud]
    reporter = types.SimpleNamespace(stats={"": phases, "failed": ["f"]})
    late = report("setup")
    with summary_scan(reporter):
        assert reporter.stats[""] == [loud]
        reporter.stats[""].append(late)
    assert reporter.stats[""] is phases
    assert phases[-1] is late and len(phases) == 4
    assert reporter.stats["failed"] == ["f"]


def test_every_process_of_an_xdist_run_lists_its_failures_through_the_summary_scan(
        pytester, monkeypatch):
    """A worker's own reporter writes the failure listing at the end of its run too, while the
    controller waits for the worker to exit: the harness registers `SummaryScan` there as well."""
    pytester.makeconftest(
        "pytest_plugins = ['harness.plugin']\n"
        "def pytest_unconfigure(config):\n"
        "    worker = getattr(config, 'workerinput', None)\n"
        "    who = 'controller' if worker is None else worker['workerid']\n"
        "    with open(f'scan-{who}.txt', 'w') as fh:\n"
        "        fh.write(str(config.pluginmanager.has_plugin('harness-summary-scan')))\n")
    pytester.makepyfile("def test_one():\n    pass\n")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "scan-controller.txt").read_text() == "True"
    assert (pytester.path / "scan-gw0.txt").read_text() == "True"


def test_each_process_registers_the_plugin_objects_of_its_role(pytester, monkeypatch):
    """A run without -n is one process that owns the run and collects: the controller's objects
    and the grid's. Under xdist the controller owns the run and each worker collects and runs."""
    pytester.makeconftest(
        "pytest_plugins = ['harness.plugin']\n"
        "NAMES = ('harness-grid', 'harness-terminal', 'harness-controller', 'harness-worker')\n"
        "def pytest_unconfigure(config):\n"
        "    worker = getattr(config, 'workerinput', None)\n"
        "    who = 'controller' if worker is None else worker['workerid']\n"
        "    terminal = type(config.pluginmanager.get_plugin('harness-terminal')).__name__\n"
        "    names = [n for n in NAMES if config.pluginmanager.has_plugin(n)]\n"
        "    with open(f'plugins-{who}.txt', 'w') as fh:\n"
        "        fh.write(' '.join(names + [terminal]))\n")
    pytester.makepyfile("def test_one():\n    pass\n")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    owner = "harness-grid harness-terminal harness-controller RunTerminal"
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
    assert (pytester.path / "plugins-controller.txt").read_text() == owner
    assert not (pytester.path / "plugins-gw0.txt").exists()
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1").assert_outcomes(passed=1)
    assert (pytester.path / "plugins-controller.txt").read_text() == owner
    assert (pytester.path / "plugins-gw0.txt").read_text() == \
        "harness-grid harness-terminal harness-worker RunHeader"


def test_a_long_captured_section_keeps_its_head_and_tail():
    from harness.plugin.terminal import OUTPUT_KEPT, trimmed_output

    short = "call\n" * 100
    assert trimmed_output(short) == short
    text = "".join(f"call {i}\n" for i in range(100_000))
    out = trimmed_output(text)
    assert out.startswith(text[:OUTPUT_KEPT]) and out.endswith(text[-OUTPUT_KEPT:])
    assert f"[... {len(text) - 2 * OUTPUT_KEPT:,} of {len(text):,} characters left out" in out
    assert len(out) < 2 * OUTPUT_KEPT + 200
