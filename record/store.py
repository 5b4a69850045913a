"""The results table and the report directory: what a report holds, how it is written, and the one
place every reader (`show`, `compare`, `merge`, `--durations-from`) loads it from.

One row per (candidate, case, dtype, device, check), plain builtins; this module turns them into a
pandas DataFrame with a fixed leading column order and writes parquet and csv, and reads them back
with a one-line `ReportError` for anything it cannot read.

Report directory layout::

    rows.jsonl        the rows as they arrive (appended row by row: what a killed run leaves)
    results.parquet  results.csv  environment.json  summary.md  index.html  fig-*.png
    manifest.json     written at start-up (status "running") and at the end (status, row count,
                      the results files' sha256), see record.manifest
    case-data/<candidate>-<case>-<dtype>-<device>.npz   (written by workers, see reports.case_data)

Nothing here reads a harness object: the harness hands over rows and plain dicts (its run facts).
"""

from __future__ import annotations

import errno
import glob
import hashlib
import json
import os
import platform
import shlex
import sys
from contextlib import contextmanager

import pandas as pd


def _load_parquet_engine() -> None:
    """pandas loads its parquet engine (and registers its extension types with pyarrow) at the
    first parquet read or write. That import cannot be repeated in a process once it was cut
    off half-way, e.g. by an exception raised asynchronously in the main thread: pyarrow keeps
    the first registration and every later write fails with "A type extension with name
    pandas.period already defined". Reports are written in processes where candidates ran
    (`harness.check`, the plugin), so the engine is loaded here, before any candidate code."""
    try:
        import pandas.io.parquet

        pandas.io.parquet.get_engine("pyarrow")
    except ImportError:  # no pyarrow: the first write says so, in one line
        pass


_load_parquet_engine()

#: The leading columns, in order; any further keys of the rows follow.
COLUMNS = ("run_id", "started", "candidate", "candidate_version", "case", "dtype", "device",
           "check", "verdict", "n", "statistic", "p_value", "message", "seed", "candidate_s",
           "harness_s", "n_stage1", "n_stage2", "p_value_stage1", "p_value_stage2", "seed_stage2",
           "alpha_suspect", "alpha_fail", "effect", "effect_unit", "mde", "n_target",
           "samples_drawn", "budget_limited", "samples_per_s", "normal_samples_per_s",
           "speed_vs_normal", "mean",
           "std", "a", "b", "shape", "shape_class", "path", "torch_version", "device_name", "profile", "worker", "repro",
           "xfail_cause", "level", "level_basis", "mechanism", "mechanism_note", "candidate_spec",
           "group",
           "bits", "bits_lo", "bits_hi", "law_bits", "resolution", "details")


SORT_KEYS = ["candidate", "case", "dtype", "device", "check"]


#: Columns that legitimately differ between two runs of the same thing (time, place, process).
VOLATILE = ("run_id", "started", "candidate_s", "harness_s", "worker", "device_name",
            "samples_per_s", "normal_samples_per_s", "speed_vs_normal")


#: Text columns: forced to strings so parquet does not guess a type from the first row.
TEXT_COLUMNS = ("message", "details", "repro", "xfail_cause", "level", "level_basis", "mechanism",
                "mechanism_note", "shape", "shape_class", "path",
                "effect_unit", "resolution",
                "candidate_version", "candidate", "case", "dtype", "device", "check", "verdict",
                "profile", "worker", "candidate_spec", "torch_version", "device_name", "run_id",
                "started", "group")


CASE_DATA_DIR = "case-data"


#: Integer columns that may be missing on some rows: nullable Int64, because float64 would round
#: 63-bit seeds (and the seed is what makes a failure reproducible).
INT_COLUMNS = ("seed", "seed_stage2", "n", "n_stage1", "n_stage2", "n_target", "samples_drawn")


class ReportError(Exception):
    """A report directory that cannot be read; str() is a one-line reason for the user."""


#: The errnos of a disk that cannot take a write (full, failing, read-only, or the directory gone),
#: as opposed to a bad file: a reader that skips a bad file must not skip these.
DISK_ERRNOS = frozenset(getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EIO", "EROFS",
                                                          "ENOENT") if hasattr(errno, name))


class DiskFault(Exception):
    """A write into the report directory failed (a full disk, an I/O error, the directory removed
    under the run); str() is one line naming the file and the errno."""

    def __init__(self, path: str, exc: OSError):
        self.path = str(getattr(exc, "filename", None) or path)
        self.errno = exc.errno
        code = errno.errorcode.get(exc.errno, "?") if exc.errno is not None else "?"
        super().__init__(f"{self.path}: {code} (errno {exc.errno}): {exc.strerror or exc}")


@contextmanager
def writing(path: str):
    """Turn an OSError raised while writing `path` into a DiskFault naming it."""
    try:
        yield
    except DiskFault:
        raise
    except OSError as exc:
        raise DiskFault(path, exc) from None


def write_atomically(path: str, write) -> None:
    """`write(tmp)` then rename onto `path`: a failed write leaves no half file under the name
    readers trust (the temporary is removed); DiskFault on failure."""
    tmp = f"{path}.{os.getpid()}.tmp"
    with writing(path):
        try:
            write(tmp)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise


def _int_array(values) -> pd.arrays.IntegerArray:
    out = []
    for v in values:
        if v is None or (isinstance(v, float) and v != v):
            out.append(None)
        else:
            out.append(int(v))
    return pd.array(out, dtype="Int64")


def results_frame(rows: list[dict], run_info: dict | None = None) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    for c in INT_COLUMNS:  # from the Python ints of the rows, before pandas makes them floats
        if c in df.columns:
            df[c] = _int_array(r.get(c) for r in rows)
    for key, value in (run_info or {}).items():
        df[key] = value
    return normalize(df)


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Fixed leading columns (missing ones added empty), stable row order."""
    df = df.copy()
    for col in COLUMNS:
        if col not in df.columns:
            df[col] = None
    extra = [c for c in df.columns if c not in COLUMNS]
    df = df[list(COLUMNS) + extra]
    if len(df):
        df = df.sort_values(SORT_KEYS, kind="stable")
    return df.reset_index(drop=True)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    # platform.processor() is often just "x86_64" on Linux, hence the /proc read first.
    return platform.processor() or platform.machine()


def device_name(device: str) -> str:
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        try:
            return torch.cuda.get_device_name(torch.device(device))
        except (RuntimeError, AssertionError):  # an index beyond the devices present
            return device
    return cpu_model() if device.startswith("cpu") else device


def command_line(args=None) -> str:
    """The command as typed: ``pytest`` and its invocation args when given, else sys.argv."""
    if args is not None:
        return "pytest " + shlex.join(str(a) for a in args)
    return shlex.join(sys.argv)


def environment(run: dict | None = None) -> dict:
    """The machine's facts (versions, CPU, GPUs, host) and the run's own (`run`: plain values)."""
    import numpy
    import scipy
    import torch

    env = {"python": sys.version.split()[0], "torch": torch.__version__, "numpy": numpy.__version__,
           "scipy": scipy.__version__, "pandas": pd.__version__, "platform": platform.platform(),
           "hostname": platform.node(),
           "cpu": cpu_model(), "cpu_count": os.cpu_count(),
           "torch_cuda": torch.version.cuda, "torch_threads": torch.get_num_threads(),
           "cuda_devices": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
           if torch.cuda.is_available() else [],
           "command": command_line(), "cwd": os.getcwd()}
    env.update(run or {})
    if "devices" in env:
        env["device_names"] = {d: device_name(str(d)) for d in env["devices"]}
    return env


def prepare_report_dir(report_dir: str) -> None:
    """Remove what a previous run left that this run would otherwise mix in (case data, figures).

    Call on the controller before the workers start (pytest_sessionstart): workers then write
    case data into a clean `case-data/`.
    """
    for path in glob.glob(os.path.join(report_dir, CASE_DATA_DIR, "*.npz")) + \
            glob.glob(os.path.join(report_dir, "fig-*.png")):
        try:
            os.remove(path)
        except OSError:
            pass


def case_data_path(report_dir: str, candidate: str, case: str, dtype: str, device: str) -> str:
    """Where a worker puts the figure data of one failing (candidate, case, dtype, device)."""
    safe = lambda s: str(s).replace(os.sep, "_").replace(" ", "_")  # noqa: E731
    name = f"{safe(candidate)}-{safe(case)}-{safe(dtype)}-{safe(device)}.npz"
    # A file spec's candidate (./sampler.py:fn) would make a hidden file, which the figures' glob
    # skips; the name only keeps groups apart (the meta inside names the group).
    dots = len(name) - len(name.lstrip("."))
    return os.path.join(report_dir, CASE_DATA_DIR, "_" * dots + name[dots:])


def write_tables(df: pd.DataFrame, report_dir: str) -> None:
    """results.csv and results.parquet, each written whole or not at all (DiskFault)."""
    write_atomically(os.path.join(report_dir, "results.csv"),
                     lambda tmp: df.to_csv(tmp, index=False))
    text = {c: "string" for c in TEXT_COLUMNS if c in df.columns}
    write_atomically(os.path.join(report_dir, "results.parquet"),
                     lambda tmp: df.astype(text).to_parquet(tmp, index=False))


# ------------------------------------------------------------------------------------------------
# Reading a report directory back


REQUIRED = ("candidate", "case", "dtype", "device", "check", "verdict")


def _read_table(path: str, allow_empty: bool = False) -> pd.DataFrame:
    """One results file; ReportError naming the file and the problem."""
    name = os.path.basename(path)
    try:
        if path.endswith(".parquet"):
            df = pd.read_parquet(path)
        else:
            # A truncated csv ends inside a row: pandas reads it as a row of missing fields, or
            # stops at a broken quote; on_bad_lines="error" turns extra fields into an error.
            df = pd.read_csv(path, dtype={c: "Int64" for c in INT_COLUMNS}, on_bad_lines="error")
    except Exception as exc:  # pyarrow and pandas raise a zoo of types for a damaged file
        first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else ""
        raise ReportError(f"{os.path.dirname(path)!r}: {name} is unreadable "
                          f"({type(exc).__name__}{': ' + first if first else ''})") from None
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ReportError(f"{os.path.dirname(path)!r}: {name} has no column(s) {', '.join(missing)} "
                          f"(not a harness results table)")
    if not len(df) and not allow_empty:
        raise ReportError(f"{os.path.dirname(path)!r}: {name} holds no rows")
    broken = df[list(REQUIRED)].isna().any(axis=1)
    if broken.any():  # a row cut in the middle (a truncated file) or a damaged one
        raise ReportError(f"{os.path.dirname(path)!r}: {name}: {int(broken.sum())} row(s) lack "
                          f"{'/'.join(REQUIRED)} (the file is truncated or damaged)")
    return df


def _identity(df: pd.DataFrame) -> list:
    return sorted(zip(*(df[c].astype(str) for c in SORT_KEYS + ["verdict"])))


def read_results(report_dir: str, allow_empty: bool = False) -> pd.DataFrame:
    """The results of a report directory; ReportError with a one-line reason.

    No silent fallback: results.parquet and results.csv are each read when present and must
    agree row for row (an artifact whose upload broke one of them is not read from the other);
    a directory holding neither but the row log of a run that did not finish (`ROW_LOG`) gives
    those rows, with ``df.attrs["partial"]`` saying so. A table without rows is an error unless
    `allow_empty` (a grid partition with nothing to run writes one)."""
    if not os.path.isdir(report_dir):
        raise ReportError(f"{report_dir!r} is not a directory")
    tables = {}
    for name in ("results.parquet", "results.csv"):
        path = os.path.join(report_dir, name)
        if os.path.exists(path):
            tables[name] = _read_table(path, allow_empty)
    if len(tables) == 2:
        pq, csv = tables["results.parquet"], tables["results.csv"]
        if len(pq) != len(csv) or _identity(pq) != _identity(csv):
            raise ReportError(f"{report_dir!r}: results.parquet ({len(pq)} rows) and results.csv "
                              f"({len(csv)} rows) disagree: one of them is truncated or stale")
    if tables:
        df = next(iter(tables.values()))
        partial = None
    else:
        rows, torn = read_row_log(report_dir)
        if not rows:
            raise ReportError(f"{report_dir!r}: no results.parquet, results.csv or {ROW_LOG} "
                              f"with rows" + (" (its only line is torn)" if torn else ""))
        df = results_frame(rows)
        missing = [c for c in REQUIRED if c not in df.columns or df[c].isna().any()]
        if missing:
            raise ReportError(f"{report_dir!r}: {ROW_LOG} rows lack {', '.join(missing)}")
        partial = (f"the run did not finish: {len(rows)} row(s) from {ROW_LOG}, no results table"
                   + (f" ({torn} torn line(s) dropped)" if torn else ""))
    df = normalize(df)
    # Text columns back to object with None for missing: the views test `isinstance(x, str)`.
    for c in TEXT_COLUMNS:
        if c in df.columns:
            df[c] = df[c].astype(object).where(df[c].notna(), None)
    df.attrs["partial"] = partial
    return df


# ------------------------------------------------------------------------------------------------
# The row log: rows persisted as groups finish, so a run killed half way leaves them readable

#: One JSON object per line, appended and flushed row by row by the process that collects the
#: rows (the xdist controller, or the only process); a run that ends writes the tables beside it.
ROW_LOG = "rows.jsonl"


class RowLog:
    """Append-only log of a run's rows in a report directory (opened at start-up, so a directory
    that cannot be written fails before anything is drawn).

    A write that fails (a full disk, an I/O error) or a log removed under the run (its directory
    deleted) raises DiskFault once; the log is then closed to further rows, and `count` stays the
    number of rows of the appends that succeeded (the failed one may have left some of its lines,
    the last one torn: readers drop a torn line)."""

    def __init__(self, report_dir: str):
        self.path = os.path.join(report_dir, ROW_LOG)
        with writing(self.path):
            self._fh = open(self.path, "w", encoding="utf-8")  # a new run: the old log goes
        self.count = 0
        self.fault: DiskFault | None = None

    def append(self, rows) -> None:
        rows = list(rows)
        if self.fault is not None or not rows:
            return
        try:
            with writing(self.path):
                self._check_present()
                self._fh.write("".join(json.dumps(row, default=str) + "\n" for row in rows))
                self._fh.flush()  # in the OS's hands: survives the death of this process
        except DiskFault as fault:
            self.fault = fault
            self._abandon()
            raise
        self.count += len(rows)

    def _check_present(self) -> None:
        if os.fstat(self._fh.fileno()).st_nlink == 0:
            raise FileNotFoundError(errno.ENOENT, "removed during the run (its report directory "
                                                  "was deleted or replaced)")

    def _abandon(self) -> None:
        """Close without flushing what the failed write left in the buffer (it would fail again)."""
        try:
            os.close(self._fh.fileno())
        except OSError:
            pass
        try:
            self._fh.close()
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        if self._fh.closed:
            return
        try:
            with writing(self.path):
                self._check_present()
                self._fh.close()
        except DiskFault as fault:
            self.fault = self.fault or fault
            self._abandon()
            raise


def read_row_log(report_dir: str) -> tuple[list[dict], int]:
    """(rows, torn lines) of a report directory's row log (([], 0) when it has none). A line cut
    by the death of its writer is dropped and counted."""
    path = os.path.join(report_dir, ROW_LOG)
    if not os.path.exists(path):
        return [], 0
    rows, torn = [], 0
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    torn += 1
                    continue
                if isinstance(row, dict):
                    rows.append(row)
                else:
                    torn += 1
    except OSError as exc:
        raise ReportError(f"{report_dir!r}: {ROW_LOG} is unreadable ({type(exc).__name__})") from None
    return rows, torn


def file_digest(path: str) -> str:
    """sha256 of a file (the manifest records those of the results, so a truncated or altered
    artifact is found)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_environment(report_dir: str) -> dict:
    """environment.json, or {} when absent or unreadable (the environment is informative only)."""
    try:
        with open(os.path.join(report_dir, "environment.json"), encoding="utf-8") as fh:
            env = json.load(fh)
        return env if isinstance(env, dict) else {}
    except (OSError, ValueError):
        return {}
