"""The figures of a report: one PNG for every case-data file of a failing row
(`render_figures`), the defects' worst groups first (`figure_order`) up to MAX_FIGURES, next to
index.html, over a pool of as many processes as the run had workers: those sit idle by then, and
the figures are most of the report's time.
"""

from __future__ import annotations

import glob
import os
import warnings

from record.store import CASE_DATA_DIR, DISK_ERRNOS

from .case_data import load_case_data, load_case_meta
from .defects import GROUP, defects
from .figures import figure_name, render_figure

#: Figures rendered per run at most (each costs ~0.3 s of CPU at session end, when the run's
#: workers are done): every defect's worst group first (`figure_order`; a report of one candidate
#: leads with at most a dozen defects), then each defect's next worst, then the other failing
#: groups.
MAX_FIGURES = 24
#: Processes rendering a report's figures at most: past this, starting them costs more than the
#: figures left to each save.
MAX_FIGURE_PROCESSES = 8
#: Figures per process at least: a process spends ~0.7 s of CPU on its imports, two figures' worth,
#: so a handful of figures is rendered here rather than in a pool.
FIGURES_PER_PROCESS = 3


def figure_processes(workers: int | None, figures: int) -> int:
    """How many processes render `figures` figures: the run's workers (xdist's -n; None or 0:
    the CPUs this process may use), at most MAX_FIGURE_PROCESSES and one per FIGURES_PER_PROCESS
    figures. 1: rendered here, one after another."""
    if not workers or workers < 1:
        try:
            workers = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            workers = os.cpu_count() or 1
    return max(1, min(workers, MAX_FIGURE_PROCESSES, figures // FIGURES_PER_PROCESS))


def render_figures(df, report_dir: str, workers: int | None = None) -> dict:
    """Render a PNG for every case-data file that belongs to a failing row of `df`.

    Returns {(candidate, case, dtype, device): png file name relative to report_dir}. Files that
    match no failing row (left from another run) are ignored; a damaged file costs only its figure
    (a warning); an OSError of the disk (DISK_ERRNOS) propagates. `workers`: processes to render
    with (`figure_processes`); the files, the names and the dict are the same for any number.
    """
    paths = sorted(glob.glob(os.path.join(report_dir, CASE_DATA_DIR, "*.npz")))
    if not paths or df is None or not len(df):
        return {}
    failing = df[df["verdict"].isin(("fail", "xfail"))]
    checks: dict = {}
    for _, r in failing.iterrows():
        checks.setdefault((r["candidate"], r["case"], r["dtype"], r["device"]), []).append(r["check"])
    case_ids = tuple(df["case"].dropna().unique())
    metas = {path: _meta_or_fault(path, case_ids) for path in paths}
    paths = by_figure_order(paths, figure_order(df), metas)
    return _FigureJobs(paths, metas, checks, case_ids, report_dir).run(workers)


def _meta_or_fault(path: str, case_ids: tuple):
    """The file's meta (`load_case_meta`), or the exception that reading it raised (drawing it
    says why); an OSError of the disk (DISK_ERRNOS) propagates."""
    try:
        return load_case_meta(path, case_ids)
    except Exception as exc:
        if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
            raise  # the disk, not the data: the run reports it as a fault
        return exc


def figure_key(meta: dict) -> tuple:
    """(candidate, case, dtype, device) of a file's meta, as the rows name a group."""
    return tuple(str(meta.get(k)) for k in ("candidate", *GROUP))


def figure_order(df) -> dict:
    """{(candidate, case, dtype, device): rank} of the groups the defects of `df` name
    (`reports.defects.defects`), in the order figures are drawn: every defect's worst group, in
    the order the report lists the defects, then every defect's second worst, and so on."""
    found = defects(df)
    order: dict = {}
    for depth in range(max((len(d.groups) for d in found), default=0)):
        for d in found:
            if depth < len(d.groups):
                order.setdefault((d.candidate, *d.groups[depth]), len(order))
    return order


def by_figure_order(paths: list, order: dict, metas: dict) -> list:
    """The case-data files, those of the groups in `order` first by rank, the others after them
    in file order (a file whose meta could not be read among them: drawing it says why)."""
    def rank(path: str) -> int:
        meta = metas[path]
        if isinstance(meta, Exception):
            return len(order)
        return order.get(figure_key(meta), len(order))

    return sorted(paths, key=rank)


def _no_figure(path: str, why: str) -> None:
    warnings.warn(f"reports: no figure for {os.path.basename(path)}: {why}", stacklevel=3)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def render_job(path: str, tmp: str, checks: list, case_ids: tuple):
    """Render one case-data file into `tmp` (here or in a pool's process): (outcome, warnings),
    plain picklable values, never an exception but an interrupt. Outcome: ("ok",), ("error",
    "Type: message"), or ("disk", errno, strerror, filename) for the parent to raise."""
    with warnings.catch_warnings(record=True) as caught:
        try:
            render_figure(load_case_data(path, case_ids), tmp, checks)
            outcome: tuple = ("ok",)
        except Exception as exc:  # one bad file must not cost the others their figures
            _remove(tmp)
            if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:
                outcome = ("disk", exc.errno, exc.strerror, exc.filename)
            else:
                outcome = ("error", f"{type(exc).__name__}: {exc}")
    return outcome, [(w.category, str(w.message)) for w in caught]


def _pool_start() -> None:
    import matplotlib

    matplotlib.use("Agg")


class _FigureJobs:
    """The figures of one report, rendered as `render_figure` one after another would leave them:
    the first MAX_FIGURES files (in `figure_order`, then name order) that belong to failing rows
    and render, each under its figure name, whatever the number of processes (`metas`: each
    file's meta, or what reading it raised).

    Each figure is drawn into a hidden temporary file and renamed onto its name in file order as
    the results come in, so that figures finished ahead of their turn never show (past the cap,
    after a failed write) and two files of one name end as the later one."""

    def __init__(self, paths: list, metas: dict, checks: dict, case_ids: tuple, report_dir: str):
        self.paths, self.metas, self.checks = paths, metas, checks
        self.case_ids, self.report_dir = case_ids, report_dir
        self.next_path = 0  # the next file to look at
        self.out: dict = {}
        self.pool = None
        self.pool_failed = False
        self.temps: set = set()

    def run(self, workers: int | None) -> dict:
        try:
            first = True
            while len(self.out) < MAX_FIGURES:
                # Only as many as may still be needed: a later file is drawn only when an earlier
                # one failed, as in a loop one after another.
                wave = self._take(MAX_FIGURES - len(self.out))
                if not wave:
                    break
                if first and figure_processes(workers, len(wave)) > 1:
                    self.pool = self._start_pool(figure_processes(workers, len(wave)))
                first = False
                self._finish(wave, [self._submit(args) for *_, args in wave])
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True, cancel_futures=True)
            for tmp in self.temps:  # what a failed write or an interrupt left half done
                _remove(tmp)
        if len(self.out) >= MAX_FIGURES and self.next_path < len(self.paths):
            warnings.warn(f"reports: more than {MAX_FIGURES} failing cases with data; "
                          "figures rendered for the defects' worst ones only", stacklevel=3)
        return self.out

    @staticmethod
    def _start_pool(processes: int):
        # spawn, not fork: the controller has torch's and xdist's threads running, whose locks a
        # fork would copy mid-flight. The pool lives for the whole report: each process pays the
        # imports (~0.7 s of CPU) once, not once per figure.
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        try:
            return ProcessPoolExecutor(max_workers=processes, initializer=_pool_start,
                                       mp_context=multiprocessing.get_context("spawn"))
        except Exception as exc:  # no process pool here (no semaphores): one after another
            warnings.warn(f"reports: figures rendered in this process: no process pool "
                          f"({type(exc).__name__}: {exc})", stacklevel=4)
            return None

    def _take(self, count: int) -> list:
        """The next `count` figures to draw, in file order: (path, key, name, job arguments)."""
        wave = []
        while len(wave) < count and self.next_path < len(self.paths):
            path = self.paths[self.next_path]
            self.next_path += 1
            meta = self.metas[path]
            if isinstance(meta, Exception):
                _no_figure(path, f"{type(meta).__name__}: {meta}")
                continue
            key = figure_key(meta)
            if key not in self.checks:
                continue
            name = figure_name(meta)
            tmp = os.path.join(self.report_dir, f".{name[:-4]}.{self.next_path}.tmp.png")
            self.temps.add(tmp)
            wave.append((path, key, name, (path, tmp, self.checks[key], self.case_ids)))
        return wave

    def _submit(self, args):
        if self.pool is None:
            return None
        try:
            return self.pool.submit(render_job, *args)
        except Exception as exc:  # the pool broke on an earlier figure: this one here
            self._pool_failure(exc)
            return None

    def _pool_failure(self, exc: BaseException) -> None:
        if not self.pool_failed:
            self.pool_failed = True
            warnings.warn(f"reports: a figure process failed ({type(exc).__name__}: {exc}); its "
                          "figures are rendered in this process", stacklevel=5)

    def _finish(self, wave: list, futures: list) -> None:
        for (path, key, name, args), future in zip(wave, futures):
            result = None
            if future is not None:
                try:
                    result = future.result()
                except Exception as exc:  # a process killed, a result that would not pickle
                    self._pool_failure(exc)
            if result is None:
                result = render_job(*args)
            outcome, caught = result
            for category, message in caught:
                warnings.warn(message, category, stacklevel=4)
            if outcome[0] == "disk":  # the disk, not the data: the run reports it as a fault
                code, strerror, filename = outcome[1:]
                final = os.path.join(self.report_dir, name)
                raise OSError(code, strerror, final if filename == args[1] else filename)
            if outcome[0] == "error":
                _no_figure(path, outcome[1])
                continue
            try:
                os.replace(args[1], os.path.join(self.report_dir, name))
            except OSError as exc:
                if exc.errno in DISK_ERRNOS:
                    raise
                _no_figure(path, f"{type(exc).__name__}: {exc}")
                continue
            self.temps.discard(args[1])
            self.out[key] = name
