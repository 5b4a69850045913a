"""One run of the harness, without pytest: its options, its plan, its report and its reproduce
lines. The pytest plugin (`harness.plugin`) and the Python API (`harness.api`) both build it in
the same steps (`planner`) and drive it.

* `harness.session.options` — the options and their validation (`parse_options -> Options`,
  `OptionError`: one line); `add_options` registers them on pytest's parser;
* `harness.session.planner` — the steps that build a run: `plan_run` (the candidates
  `resolve_candidates` gives, the devices, the xfails -> a `HarnessSession`);
* `harness.session.run_plan` — `HarnessSession`: the groups of the run (listed when it is made,
  with the partition), the checks each runs, their runners, skip reasons, xfails, `open_sink`,
  `run_check` (a check on a group -> its row) and `run_in_process` (the API's whole run);
* `harness.session.sink` — `ReportSink`: the report directory, from its lock at start-up to the
  final manifest; `REPORT_WRITE_FAILED`;
* `harness.session.repro` — `ReproLines`: the command that reruns a row's check;
* `harness.session.rows`, `devices`, `xfails` — row skeletons and the throughput line, the
  devices a run may use, the xfails file.

May import: `harness.fleet`, `harness.sharded` and the floors below them, `reports`,
`record`, `candidates`, `reference`; never pytest.
"""
