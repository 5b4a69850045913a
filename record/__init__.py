"""The record of a run: what the harness writes while it runs and every reader reads back.

A floor of its own, below both the harness that writes the record and the reports that read it,
so that neither has to reach into the other for the names and files they share:

* `record.ids` — the group-id grammar: the one format and the one parse of a case group's id
  and of a report's case label;
* `record.store` — the results table and the report directory: the row log, parquet and csv,
  the environment, and the one loader every reader uses (`ReportError` for what it cannot read);
* `record.manifest` — manifest.json: what one process of a run was asked to run, what it ran and
  where;
* `record.leases` — in-flight markers that tell a crashed worker from a busy one, and the run
  lock of a report directory.

Floors inside: `manifest` over `store`; `ids` and `leases` stand alone (`.importlinter`).

May import: `reference` (the dtype names), pandas, pyarrow; never `candidates`, `harness` or
`reports` (rows and manifests are plain data).
"""
