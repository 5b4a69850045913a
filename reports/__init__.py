"""Reports of a conformance run: the results table (pandas -> parquet/csv), the environment, and
the views people and CI read (`python -m reports show|compare|merge`).

May import: `reference.dtypes`, pandas, pyarrow, matplotlib; never `harness` (rows and
manifests are plain data).
"""
