"""What the harness writes on pytest's terminal, and pytest's failure listing without its scan.

* `RunHeader`: the ``harness:`` lines of the header (every process: a worker's reporter writes
  them too, unseen);
* `RunTerminal`: the process that owns the run's report (the xdist controller, or the one
  process of a run without -n) also says lines during the run (`RunTerminal.say`) and writes
  the conformance summary at the end;
* `CandidateOutput`: a test's captured output (stdout, stderr, log) is whatever its candidate
  said over every call of its draw, thousands of calls at `pr`: each section of a report keeps
  its head and its tail, so that a sampler printing on each call neither floods the failure
  listing (16 MB for two tiny-tensor groups, 2 KB a call) nor crosses from a worker whole;
* `SummaryScan`: for every failed test, pytest's terminal reporter looks for the test's teardown
  output by scanning every passed setup and teardown report of the session (``stats[""]``): with
  the 567 failures of the main job among 4220 tests that is ~5 million report comparisons,
  seconds at the end of a run in which nothing else happens, and it grows with failures x tests.
  Only a teardown report with captured sections can print anything there, so while pytest writes
  its summary the reporter sees those alone (`summary_scan`); every other report is back in its
  place afterwards.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from contextlib import contextmanager

import pytest
import torch

from reference.dtypes import dtype_name
from reports.defects import allowed_reason, defects, tally_text

from ..session.run_plan import HarnessSession
from ..session.rows import throughput


def printable_teardowns(reports) -> list:
    """The reports of `reports` whose teardown output pytest's failure listing can print."""
    return [r for r in reports
            if getattr(r, "when", None) == "teardown" and getattr(r, "sections", None)]


@contextmanager
def summary_scan(reporter):
    """`reporter.stats[""]` cut to `printable_teardowns` inside the block, then restored as it was
    (the same list object, with any report appended meanwhile)."""
    stats = getattr(reporter, "stats", None)
    kept = stats.get("") if isinstance(stats, dict) else None
    if not kept:
        yield
        return
    shown = printable_teardowns(kept)
    before = len(shown)
    stats[""] = shown
    try:
        yield
    finally:
        if stats.get("") is shown:  # a report logged meanwhile stays logged
            kept.extend(shown[before:])
        stats[""] = kept


#: Characters of a captured section kept at each end (`trimmed_output`).
OUTPUT_KEPT = 4000


def trimmed_output(text: str, kept: int = OUTPUT_KEPT) -> str:
    """`text`, or its first and last `kept` characters around a line saying how much of it is
    left out."""
    if len(text) <= 2 * kept + 200:  # the line saying so would save little
        return text
    left_out = len(text) - 2 * kept
    return (f"{text[:kept]}\n[... {left_out:,} of {len(text):,} characters left out by the "
            f"harness ...]\n{text[-kept:]}")


class CandidateOutput:
    """The plugin object that trims the captured sections of every test report to
    `trimmed_output` (registered in every process: a worker trims before it sends)."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        report.sections = [(title, trimmed_output(text)) for title, text in report.sections]
        return report


class SummaryScan:
    """The plugin object that puts `summary_scan` around every plugin's terminal summary
    (pytest's failure listing included); registered in the controller and in each worker."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter):
        with summary_scan(terminalreporter):
            return (yield)


def budget_text(seconds: float | None) -> str:
    return "none" if seconds is None else f"{seconds:g} s of candidate time per case"


def header_lines(s: HarnessSession) -> list[str]:
    """The ``harness:`` lines of pytest's header: candidates, torch, the grid, the profile."""
    cands = ", ".join(f"{c.name} ({c.version})" for c in s.candidates)
    cfg = s.run_config
    n = str(cfg.n(1))
    if any(d.startswith("cuda") for d in s.devices) and cfg.n(1, "cuda") != cfg.n(1):
        n += f" on CPU, {cfg.n(1, 'cuda')} on CUDA"
    slow = [c for c in s.cases if cfg.n(1, "cpu", c) != cfg.n(1)]
    if slow:
        n += f"; {', '.join(c.id for c in slow)}: {cfg.n(1, 'cpu', slow[0])}"
    sharded = ""
    if s.layouts:
        sharded = (f"; sharded: world sizes {','.join(str(w) for w in s.world_sizes if w > 1)}, "
                   f"{len(s.layouts)} layouts ({', '.join(l.label for l in s.layouts[:6])}"
                   f"{', ...' if len(s.layouts) > 6 else ''})")
    lines = [f"harness: candidates {cands}",
             f"harness: torch {torch.__version__}; devices {', '.join(s.devices)}; dtypes "
             f"{', '.join(dtype_name(d) for d in s.dtypes)}",
             f"harness: profile {cfg.profile} (n={n} per case, stage 2 x4); "
             f"budget {budget_text(cfg.case_budget_s)}; seed {cfg.run_seed}; bounds {cfg.bounds}; "
             f"alpha {cfg.alpha_suspect:g}/{cfg.alpha_fail:g}{sharded}"]
    if s.partition is not None:
        lines.append(f"harness: {s.partition.describe()}")
    if s.options.xfails_choice:
        lines.append(f"harness: {s.options.xfails_choice}")
    return lines


class RunHeader:
    """The plugin object that adds the run's `header_lines` to pytest's header."""

    def __init__(self, session: HarnessSession):
        self.session = session

    def pytest_report_header(self, config):
        return header_lines(self.session)


class RunTerminal(RunHeader):
    """The terminal of the process that owns the run's report: the header, the lines said while
    the run goes on, and the conformance summary (verdicts, defects, failing checks, throughput,
    where the report is) at the end."""

    def __init__(self, session: HarnessSession, config):
        super().__init__(session)
        self.config = config

    def say_early(self, text: str) -> None:
        """A line before the terminal reporter is set up (pytest_configure): straight to stderr."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(text, yellow=True)
        else:
            sys.stderr.write(text + "\n")

    def say(self, text: str) -> None:
        """A line on the terminal while the run goes on (nothing where there is no reporter)."""
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(text, yellow=True)

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        s = self.session
        if not s.report.rows:
            return
        tr = terminalreporter
        tr.section("truncated-normal conformance")
        counts = Counter(r.get("verdict", "?") for r in s.report.rows)
        tr.write_line("verdicts: " + ", ".join(f"{k} {counts[k]}" for k in
                                               ("pass", "fail", "error", "xfail", "skip")
                                               if counts[k]))
        fail_on = s.options.fail_on
        allowed = sum(1 for r in s.report.rows if r.get("verdict") == "fail"
                      and allowed_reason(r.get("level"), fail_on) is not None)
        if allowed:
            tr.write_line(f"--fail-on {fail_on}: {allowed} failing row(s) below it allowed (xfail "
                          f"in pytest's count; fail in the report)")
        found = defects(s.report.rows)
        for name in dict.fromkeys(d.candidate for d in found):
            tr.write_line(f"defects of {name}: "
                          f"{tally_text(d for d in found if d.candidate == name)}")
        fails = defaultdict(list)
        for r in s.report.rows:
            if r.get("verdict") in ("fail", "error"):
                fails[r["check"]].append(r)
        for check, rows in sorted(fails.items()):
            tr.write_line(f"  {check}: {len(rows)} failing")
            for r in rows[:6]:
                tr.write_line(f"    {r['candidate']} {r['case']} {r['dtype']} {r['device']}: "
                              f"{str(r.get('message', ''))[:150]}")
            if len(rows) > 6:
                tr.write_line(f"    ... {len(rows) - 6} more (see the report)")
        for name, (n, secs) in throughput(s.report.rows).items():
            rate = (f"{n / secs / 1e6:.2f} M samples/s inside the candidate" if secs > 0 and n
                    else "n/a")
            tr.write_line(f"throughput {name}: {n} samples in {secs:.1f} s, {rate}")
        written = s.report.written
        if written:
            tr.write_line(f"report written to {written}")
