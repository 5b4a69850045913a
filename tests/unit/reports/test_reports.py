"""Self-tests of reports/: the results table, summary.md, index.html and its figures, and the
`python -m reports show|compare|merge` command line, on crafted rows (fast, no sampling) and, when
the rest of the harness is importable, on one real tiny run."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from record.store import CASE_DATA_DIR, case_data_path, read_environment, read_results
from reports import case_data, figure_jobs
from reports import figures as F
from reports.__main__ import main as cli
from reports.compare import compare
from reports.render import write_run
from reports.overview import cell_text, grid, is_level_cell, worst

from report_rows import row

ROOT = str(Path(__file__).resolve().parents[3])


# ------------------------------------------------------------------------------------------------
# Crafted rows


def crafted_rows() -> list[dict]:
    rows = []
    for case in ("normal-2sigma", "abs-bounds-trap"):
        for dtype in ("float32", "bfloat16"):
            for check in ("finite", "bounds", "gof", "ks"):
                rows.append(row(case, dtype, check))
    # abs-bounds-trap bf16 fails bounds and gof; one xfail; one skip; one crash; one API row.
    for r in rows:
        if (r["case"], r["dtype"]) == ("abs-bounds-trap", "bfloat16") and r["check"] in ("bounds", "gof"):
            r.update(verdict="fail", message=f"{r['check']}: 12 values at 2.0 = RN(b), expected 0 "
                                             f"(P = 1e-2000)", effect=12.0, effect_unit="obs/exp",
                     p_value=0.0, p_value_stage1=0.0,
                     repro="pytest suites --candidate torch --cases abs-bounds-trap --dtypes "
                           f"bfloat16 --devices cpu -k test_{r['check']}")
    rows.append(row("normal-2sigma", "bfloat16", "atoms", "xfail", message="atom mismatch",
                    xfail_cause="upstream issue 1234"))
    rows.append(row("normal-2sigma", "float32", "contract", "skip", message="meta not claimed"))
    rows.append(row("tail-5", "float32", "hang", "error", message="worker 'gw1' crashed while running"))
    rows.append(row("api", "float32", "arguments", "pass", mean=None, std=None, a=None, b=None))
    return rows


#: The run's case order, as the plugin records it in environment.json (the grid's order).
CASE_ORDER = ["normal-2sigma", "abs-bounds-trap", "tail-5"]


@pytest.fixture
def report(tmp_path):
    d = tmp_path / "report"
    write_run(crafted_rows(), str(d), {"cases": CASE_ORDER})
    return d


# ------------------------------------------------------------------------------------------------
# A stand-in bfloat16 law (16-bit: one histogram bin per value), used when `reference` is not
# importable; the same interface as reference.RoundedLaw for what harness.figure_data reads.


class _Bf16Format:
    bits, hist_bits, name = 16, 16, "bfloat16"

    def __init__(self):
        import torch

        u = np.arange(1 << 16, dtype=np.uint32)
        keys = np.where(u & 0x8000, (~u) & 0xFFFF, u | 0x8000)
        pattern = np.empty(1 << 16, dtype=np.uint32)
        pattern[keys] = u  # key -> bit pattern
        vals = torch.from_numpy(pattern.astype(np.uint16).view(np.int16)).view(torch.bfloat16)
        self.values = vals.double().numpy()

    def hist_bin_bounds(self):
        return self.values.copy(), self.values.copy()

    def ordered_keys(self, x):
        import torch

        u = torch.from_numpy(np.asarray(x, dtype=np.float64)).to(torch.bfloat16).view(torch.int16)
        u = u.numpy().view(np.uint16).astype(np.uint64)
        return np.where(u & 0x8000, (~u) & 0xFFFF, u | 0x8000).astype(np.uint64)

    def round(self, x):
        import torch

        return torch.tensor(float(x), dtype=torch.float64).to(torch.bfloat16).double().item()


class _FakeLaw:
    def __init__(self, mean, std, a, b):
        from scipy.stats import truncnorm

        self.fmt = _Bf16Format()
        self.dist = type("D", (), {"loc": mean, "scale": std})()
        self.rn_a, self.rn_b = self.fmt.round(a), self.fmt.round(b)
        v = self.fmt.values
        fin = np.isfinite(v)
        idx = np.flatnonzero(fin)
        cells = np.concatenate([[-np.inf], (v[idx][:-1] + v[idx][1:]) / 2, [np.inf]])
        tn = truncnorm((a - mean) / std, (b - mean) / std, loc=mean, scale=std)
        p = np.zeros(v.size)
        p[idx] = np.clip(tn.cdf(cells[1:]) - tn.cdf(cells[:-1]), 0, None)
        self._p = p
        self.atom_a = self.atom_b = 0.0

    def hist_bin_probs(self):
        return self._p


def make_law(mean, std, a, b):
    try:
        import torch
        from reference import TruncatedNormal, rounded_law

        return rounded_law(TruncatedNormal(mean, std, a, b), torch.bfloat16)
    except ImportError:
        return _FakeLaw(mean, std, a, b)


def make_summary(law, n, a, b, extra_at=None, extra=0, seed=0):
    """A Summary whose histogram is a multinomial draw from the law, plus `extra` samples at the
    value `extra_at` (a sampler that piles values onto a bound)."""
    from harness.families.binned import BinnedState
    from harness.summary import Summary

    rng = np.random.default_rng(seed)
    p = law.hist_bin_probs()
    hist = rng.multinomial(n - extra, p / p.sum()).astype(np.int64)
    if extra:
        k = int(law.fmt.ordered_keys(np.array([extra_at]))[0]) >> (law.fmt.bits - 16)
        hist[k] += extra
    return Summary(dtype="bfloat16", shape=(n,), hist_bits=16, center=0.0, scale=1.0,
                   rn_a=law.rn_a, rn_b=law.rn_b, a=a, b=b, n=n,
                   states={"binned": BinnedState(hist=hist)})


# ------------------------------------------------------------------------------------------------
# The table and the environment


def test_write_run_writes_every_file(report):
    for name in ("results.parquet", "results.csv", "environment.json", "summary.md", "index.html"):
        assert (report / name).is_file(), name
    assert not (report / "views-error.txt").exists()
    df = read_results(str(report))
    assert len(df) == len(crafted_rows())
    assert list(df.columns[:8]) == ["run_id", "started", "candidate", "candidate_version", "case",
                                    "dtype", "device", "check"]
    env = read_environment(str(report))
    for key in ("python", "torch", "numpy", "scipy", "cpu", "command", "hostname"):
        assert env.get(key), key


def test_seeds_survive_missing_values(tmp_path):
    rows = [row(check="gof", seed=4897795778203609103, seed_stage2=4897795778203609105),
            row(check="finite", seed=4897795778203609103, seed_stage2=None),
            row(check="contract", verdict="skip", seed=None)]
    write_run(rows, str(tmp_path))
    for reader in ("parquet", "csv"):
        if reader == "csv":
            os.remove(tmp_path / "results.parquet")
        df = read_results(str(tmp_path)).set_index("check")
        assert df.loc["gof", "seed_stage2"] == 4897795778203609105  # not rounded through float64
        assert df.loc["finite", "seed"] == 4897795778203609103
        assert pd.isna(df.loc["contract", "seed"])


def test_csv_fallback_reads_the_same(report):
    pq = read_results(str(report))
    os.remove(report / "results.parquet")
    csv = read_results(str(report))
    assert list(csv["verdict"]) == list(pq["verdict"])
    assert list(csv["message"]) == list(pq["message"])


# ------------------------------------------------------------------------------------------------
# summary.md


def test_worst_verdict_order():
    assert worst(["pass", "skip"]) == "pass"
    assert worst(["pass", "fail", "xfail"]) == "fail"
    assert worst(["fail", "error"]) == "error"
    assert worst(["skip"]) == "skip"
    assert worst([None]) is None


def test_summary_grid_failures_environment(report):
    df = read_results(str(report))
    g = grid(df, "torch", read_environment(str(report))["cases"])
    assert list(g.columns) == ["float32", "bfloat16"]
    assert g.index[0] == "normal-2sigma" and g.index[-1] == "api"
    assert list(grid(df, "torch").index)[:2] == ["abs-bounds-trap", "normal-2sigma"]  # no order: sorted
    assert g.loc["abs-bounds-trap", "bfloat16"] == "unrated"  # fail rows no diagnosis rated
    assert g.loc["normal-2sigma", "bfloat16"] == "xfail"
    assert g.loc["normal-2sigma", "float32"] == "pass"  # a skipped check does not hide the passes
    assert g.loc["tail-5", "float32"] == "error"
    assert g.loc["tail-5", "bfloat16"] is None
    text = (report / "summary.md").read_text(encoding="utf-8")
    assert "| abs-bounds-trap | ✔ | unrated |" in text
    assert "| normal-2sigma | ✔ | xfail |" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("- ✘") or ln.startswith("- error")]
    assert len(lines) == 3
    bounds = next(ln for ln in lines if "**bounds**" in ln)
    assert "`abs-bounds-trap` bfloat16" in bounds and "expected 0" in bounds
    assert "effect 12 obs/exp" in bounds and "-k test_bounds`" in bounds
    env = text.split("Environment:")[1].strip().splitlines()
    assert len(env) == 3 and env[1].startswith("- python ")
    assert len(text.splitlines()) < 60  # one screen


# ------------------------------------------------------------------------------------------------
# Figures and index.html


@pytest.fixture(scope="module")
def trap_case_data(tmp_path_factory):
    """Figure data of abs-bounds-trap (std 0.02, bounds +-2) in bfloat16 with 40 samples piled on
    RN(b) = 2: the shape of the bf16 bug report."""
    d = tmp_path_factory.mktemp("cd")
    law = make_law(0.0, 0.02, -2.0, 2.0)
    s = make_summary(law, 200_000, -2.0, 2.0, extra_at=2.0, extra=40)
    path = case_data_path(str(d), "torch", "abs-bounds-trap", "bfloat16", "cpu")
    from harness.figure_data import figure_data

    case_data.save_case_data(path, figure_data(s, law),
                             meta={"candidate": "torch", "case": "abs-bounds-trap", "device": "cpu"})
    return path


def test_case_data_is_small_and_complete(trap_case_data):
    assert os.path.getsize(trap_case_data) < 300_000
    data = case_data.load_case_data(trap_case_data)
    assert data["meta"]["case"] == "abs-bounds-trap" and data["meta"]["dtype"] == "bfloat16"
    assert data["n"] == 200_000
    assert data["g_count"].sum() == 200_000  # the groups cover every sample
    assert data["g_prob"].sum() == pytest.approx(1.0, abs=1e-9)
    # The 40 impossible samples at 2.0 are kept at full resolution.
    at2 = data["f_count"][data["f_lo"] == 2.0]
    assert at2.sum() >= 40 and data["f_prob"][data["f_lo"] == 2.0].max() < 1e-100


def test_meta_from_name():
    m = case_data.meta_from_name("/x/my-cand-abs-bounds-trap-bfloat16-cuda:0.npz",
                         ("normal-2sigma", "abs-bounds-trap"))
    assert m == {"candidate": "my-cand", "case": "abs-bounds-trap", "dtype": "bfloat16",
                 "device": "cuda:0"}


def test_figure_renders(trap_case_data, tmp_path):
    png = F.render_figure(trap_case_data, str(tmp_path / "f.png"), ["bounds", "gof"])
    from matplotlib.image import imread

    img = imread(png)
    assert img.shape[0] > 500 and img.shape[1] > 900
    assert img[..., :3].std() > 0.05  # not blank


def test_index_html_with_figure(tmp_path, trap_case_data):
    d = tmp_path / "r"
    os.makedirs(d / CASE_DATA_DIR)
    shutil.copy(trap_case_data, d / CASE_DATA_DIR / os.path.basename(trap_case_data))
    # A stale file from another run (its case passed here) must not get a figure.
    shutil.copy(trap_case_data, d / CASE_DATA_DIR / "torch-normal-2sigma-float32-cpu.npz")
    write_run(crafted_rows(), str(d), {"cases": CASE_ORDER})
    assert not (d / "views-error.txt").exists()
    figs = sorted(p.name for p in d.glob("fig-*.png"))
    assert figs == ["fig-torch-abs-bounds-trap-bfloat16-cpu.png"]
    page = (d / "index.html").read_text(encoding="utf-8")
    assert f"<img src='{figs[0]}'" in page
    assert "abs-bounds-trap" in page and "upstream issue 1234" in page
    assert "href='#fig-torch-abs-bounds-trap-bfloat16-cpu'" in page


# ------------------------------------------------------------------------------------------------
# Figures over a process pool: the same files and the same dict as one after another


def _exit_in_a_child(*args):
    """A figure job whose process dies (as one the OOM killer takes): the pool breaks."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        os._exit(3)
    return _RENDER_JOB(*args)


_RENDER_JOB = figure_jobs.render_job


def _figure_dir(d: Path, src: str, candidates, damaged=()) -> Path:
    """A report dir whose case data is `src` under each candidate's name (and meta), plus damaged
    files: `<c>` in `damaged` gets a file that is no npz at all, or, for a name ending in
    '-noarray', one whose meta reads but whose arrays are incomplete."""
    import json

    with np.load(src) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"]))
    for c in candidates:
        path = case_data_path(str(d), c, "abs-bounds-trap", "bfloat16", "cpu")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        mine = dict(arrays, meta=np.array(json.dumps(meta | {"candidate": c})))
        if c in damaged and c.endswith("-noarray"):
            del mine["g_lo"]
        if c in damaged and not c.endswith("-noarray"):
            Path(path).write_bytes(b"not an npz")
        else:
            np.savez(path, **mine)
    return d


def _failing(candidates) -> pd.DataFrame:
    return pd.DataFrame([row("abs-bounds-trap", "bfloat16", "bounds", "fail", candidate=c)
                         for c in candidates])


def _render(d: Path, workers: int):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figs = figure_jobs.render_figures(_failing(CANDIDATES), str(d), workers)
    return figs, [str(w.message) for w in caught]


CANDIDATES = ["c0", "c1-broken", "c2-noarray", "c3", "c4"]


def test_figure_processes_follow_the_runs_workers():
    assert figure_jobs.figure_processes(2, 60) == 2
    assert figure_jobs.figure_processes(1, 60) == 1  # one worker: rendered here, as before
    assert figure_jobs.figure_processes(64, 60) == figure_jobs.MAX_FIGURE_PROCESSES
    # a few figures: few processes
    assert figure_jobs.figure_processes(8, 2 * figure_jobs.FIGURES_PER_PROCESS) == 2
    assert figure_jobs.figure_processes(8, figure_jobs.FIGURES_PER_PROCESS - 1) == 1
    for unknown in (None, 0):  # no -n: the CPUs here
        assert 1 <= figure_jobs.figure_processes(unknown, 60) <= figure_jobs.MAX_FIGURE_PROCESSES


def test_figures_over_a_pool_are_those_of_one_process(tmp_path, trap_case_data, monkeypatch):
    """A pool of two draws the same PNGs (byte for byte), under the same names, and returns the
    same dict in the same order as one process; a damaged file costs its figure only, as a
    warning, whether the parent (no npz) or the pool's process (arrays missing) finds it; a file
    of a passing case gets none; no temporary is left behind."""
    monkeypatch.setattr(figure_jobs, "FIGURES_PER_PROCESS", 1)
    dirs = {}
    for workers in (1, 2):
        d = _figure_dir(tmp_path / f"w{workers}", trap_case_data, CANDIDATES + ["passing"],
                        damaged=("c1-broken", "c2-noarray"))
        figs, said = _render(d, workers)
        assert list(figs) == [(c, "abs-bounds-trap", "bfloat16", "cpu") for c in ("c0", "c3", "c4")]
        assert [s for s in said if "c1-broken" in s or "c2-noarray" in s] == [
            s for s in said if s.startswith("reports: no figure for")], said
        assert any("c1-broken" in s for s in said) and any("KeyError: 'g_lo'" in s for s in said)
        assert sorted(p.name for p in d.iterdir()) == ["case-data", *sorted(figs.values())]
        dirs[workers] = (d, figs)
    (d1, figs1), (d2, figs2) = dirs[1], dirs[2]
    assert list(figs1.items()) == list(figs2.items())
    for name in figs1.values():
        assert (d1 / name).read_bytes() == (d2 / name).read_bytes()


@pytest.mark.parametrize("workers", [1, 2])
def test_the_figure_cap_counts_figures_drawn(tmp_path, trap_case_data, monkeypatch, workers):
    """MAX_FIGURES figures, the first ones in file order that draw: a damaged file does not take
    a place, and nothing past the cap is drawn (warned once)."""
    monkeypatch.setattr(figure_jobs, "FIGURES_PER_PROCESS", 1)
    monkeypatch.setattr(figure_jobs, "MAX_FIGURES", 2)
    d = _figure_dir(tmp_path, trap_case_data, CANDIDATES, damaged=("c1-broken", "c2-noarray"))
    figs, said = _render(d, workers)
    assert [k[0] for k in figs] == ["c0", "c3"]
    assert sorted(p.name for p in d.glob("*.png")) == sorted(figs.values())
    assert sum("more than 2 failing cases" in s for s in said) == 1


def test_a_sampler_named_by_a_relative_file_gets_its_figure(tmp_path, trap_case_data):
    """``--candidate ./my_sampler.py:fill`` names the group's case data; a name that began with
    '.' was a hidden file, which the figures' glob never saw."""
    specs = ["./my_sampler.py:fill", "../up/my_sampler.py:fill"]
    d = _figure_dir(tmp_path, trap_case_data, specs)
    assert not any(p.name.startswith(".") for p in (d / CASE_DATA_DIR).iterdir())
    figs = figure_jobs.render_figures(_failing(specs), str(d), 1)
    assert list(figs) == [(c, "abs-bounds-trap", "bfloat16", "cpu") for c in specs]


def test_figures_follow_the_defects_not_the_file_names(tmp_path, trap_case_data, monkeypatch):
    """Past the cap, the figures drawn are the defects' worst groups in the report's order (its
    candidates in row order here: one unexplained defect each), not the first file names."""
    monkeypatch.setattr(figure_jobs, "MAX_FIGURES", 2)
    d = _figure_dir(tmp_path, trap_case_data, CANDIDATES)
    rows = _failing(["c4", "c3", "c0", "c1-broken", "c2-noarray"])
    assert list(figure_jobs.figure_order(rows)) == [(c, "abs-bounds-trap", "bfloat16", "cpu") for c in
                                          ("c4", "c3", "c0", "c1-broken", "c2-noarray")]
    import warnings

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        figs = figure_jobs.render_figures(rows, str(d), 1)
    assert [k[0] for k in figs] == ["c4", "c3"]


def test_a_killed_figure_process_costs_no_figure(tmp_path, trap_case_data, monkeypatch):
    """The pool's processes die (killed, out of memory): the figures are drawn here instead, the
    same ones, with a warning that says so."""
    monkeypatch.setattr(figure_jobs, "FIGURES_PER_PROCESS", 1)
    want, _ = _render(_figure_dir(tmp_path / "here", trap_case_data, CANDIDATES), 1)
    monkeypatch.setattr(figure_jobs, "render_job", _exit_in_a_child)
    d = _figure_dir(tmp_path / "pool", trap_case_data, CANDIDATES)
    figs, said = _render(d, 2)
    assert list(figs.items()) == list(want.items()) and len(figs) == len(CANDIDATES)
    assert sum("a figure process failed (BrokenProcessPool" in s for s in said) == 1, said
    assert sorted(p.name for p in d.iterdir()) == ["case-data", *sorted(figs.values())]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_full_disk_under_the_figures_is_an_oserror(small_disk, tmp_path, trap_case_data,
                                                     monkeypatch, workers):
    """Figures on a 64 KiB filesystem (the case data elsewhere): the first figure that does not
    fit raises its ENOSPC, from a pool's process as from this one (the sink makes it a partial
    report), and leaves no temporary behind."""
    import errno

    monkeypatch.setattr(figure_jobs, "FIGURES_PER_PROCESS", 1)
    data = _figure_dir(tmp_path / "data", trap_case_data, CANDIDATES)
    report = small_disk / "report"
    report.mkdir()
    (report / CASE_DATA_DIR).symlink_to(data / CASE_DATA_DIR)
    with pytest.raises(OSError) as info:
        figure_jobs.render_figures(_failing(CANDIDATES), str(report), workers)
    assert info.value.errno == errno.ENOSPC
    assert [p.name for p in report.iterdir() if p.name.startswith(".")] == []


def test_stairs_draw_what_axes_stairs_draws():
    """The density steps are the StepPatch `ax.stairs` makes, with the same data limits (the
    figures stay the same pixel for pixel), gaps (NaN) included."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    values = np.array([1.0, np.nan, 3.0, 0.5, np.nan])
    edges = np.array([-1.0, 0.0, 0.5, 2.0, 2.5, 4.0])
    fig = Figure()
    a, b = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for ax in (a, b):
        ax.set_yscale("log")
    a.stairs(values, edges, fill=True, color="tab:blue", alpha=0.45, label="x")
    a.stairs(values, edges, color="black", lw=1.1)
    F.stairs(b, values, edges, fill=True, facecolor="tab:blue", linewidth=0, alpha=0.45,
              label="x")
    F.stairs(b, values, edges, fill=False, edgecolor="black", lw=1.1)
    assert len(a.patches) == len(b.patches) == 2
    for p, q in zip(a.patches, b.patches):
        assert np.array_equal(p.get_path().vertices, q.get_path().vertices)
        assert np.array_equal(p.get_path().codes, q.get_path().codes)
        assert (p.get_fill(), p.get_facecolor(), p.get_edgecolor(), p.get_linewidth(),
                p.get_label(), p.sticky_edges.y) == \
               (q.get_fill(), q.get_facecolor(), q.get_edgecolor(), q.get_linewidth(),
                q.get_label(), q.sticky_edges.y)
    assert np.array_equal(a.dataLim.get_points(), b.dataLim.get_points())
    assert a.dataLim.minposy == b.dataLim.minposy
    assert np.allclose(a.get_ylim(), b.get_ylim()) and np.allclose(a.get_xlim(), b.get_xlim())


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_index_html_in_headless_chromium(tmp_path, trap_case_data):
    d = tmp_path / "r"
    os.makedirs(d / CASE_DATA_DIR)
    shutil.copy(trap_case_data, d / CASE_DATA_DIR / os.path.basename(trap_case_data))
    write_run(crafted_rows(), str(d), {"cases": CASE_ORDER})
    shot = tmp_path / "shot.png"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run",
           f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2400",
           f"--screenshot={shot}", f"file://{d / 'index.html'}"]
    subprocess.run(cmd, capture_output=True, timeout=60)
    assert shot.is_file()
    from matplotlib.image import imread

    img = imread(str(shot))[..., :3]
    assert img.shape[0] >= 2000
    # The grid rendered: the red of a failing cell (#fbdada) ...
    red = np.abs(img - np.array([0xfb, 0xda, 0xda]) / 255).max(axis=2) < 0.02
    assert red.sum() > 500
    # ... and the figure loaded: the light blue of the observed histogram (tab:blue at alpha
    # 0.45 over white) covers many pixels, which nothing else on the page is coloured.
    blue = np.abs(img - np.array([155, 195, 224]) / 255).max(axis=2) < 0.05
    assert blue.sum() > 2000
    if os.environ.get("REPORTS_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["REPORTS_KEEP_SCREENSHOT"])


# ------------------------------------------------------------------------------------------------
# The command line


def _dir(tmp_path, name, rows) -> str:
    d = tmp_path / name
    write_run(rows, str(d))
    return str(d)


def test_show_prints_summary(report, capsys):
    assert cli(["show", str(report)]) == 0
    out = capsys.readouterr().out
    assert "| abs-bounds-trap | ✔ | unrated |" in out
    # Rebuilt from results.csv alone when summary.md and parquet are gone.
    os.remove(report / "summary.md")
    os.remove(report / "results.parquet")
    assert cli(["show", str(report)]) == 0
    assert "| abs-bounds-trap | ✔ | unrated |" in capsys.readouterr().out


def _base_new(tmp_path, new_changes, new_candidate="torch", new_device="cpu"):
    base = [row(c, "float32", k) for c in ("normal-2sigma", "tail-5") for k in ("bounds", "gof")]
    base.append(row("half-normal", "float32", "gof", "fail", message="chi2 off"))
    new = []
    for r in base:
        r2 = dict(r, candidate=new_candidate, candidate_spec=new_candidate,
                  candidate_version="deadbeef", device=new_device)
        r2.update(new_changes.get((r["case"], r["check"]), {}))
        new.append(r2)
    return _dir(tmp_path, "base", base), _dir(tmp_path, "new", new)


def test_compare_new_failure_exits_1(tmp_path, capsys):
    base, new = _base_new(tmp_path, {("tail-5", "gof"): {"verdict": "fail", "message": "chi2 = 900",
                                                         "effect": 0.4, "p_value_stage1": 1e-9}})
    assert cli(["compare", base, new]) == 1
    out = capsys.readouterr().out
    section = out.split("## New failures (1)")[1].split("##")[0]
    assert "`tail-5` float32 cpu **gof**: chi2 = 900" in section
    assert "## Fixed (0)" in out


def test_compare_fixed_exits_0(tmp_path, capsys):
    base, new = _base_new(tmp_path, {("half-normal", "gof"): {"verdict": "pass"}})
    assert cli(["compare", base, new]) == 0
    out = capsys.readouterr().out
    assert "## New failures (0)" in out and "## Fixed (1)" in out and "half-normal" in out


def test_compare_is_candidate_agnostic(tmp_path, capsys):
    # Another candidate name and version on another GPU index: still the same keys.
    base, new = _base_new(tmp_path, {("normal-2sigma", "bounds"): {"verdict": "error"}},
                          new_candidate="mine", new_device="cpu")
    assert cli(["compare", base, new]) == 1
    assert "Matched 5 " in capsys.readouterr().out
    text, status = compare(pd.DataFrame([row(device="cuda:0")]),
                           pd.DataFrame([row(device="cuda:1", candidate="x", verdict="fail")]))
    assert status == 1
    text, status = compare(pd.DataFrame([row(device="cpu")]),
                           pd.DataFrame([row(device="cuda:0", verdict="fail")]))
    # NEW ran no cpu: BASE's cpu key is lost coverage, and the cuda failure is listed
    assert status == 1 and "Failing in NEW, not run in BASE (1)" in text
    assert "missing in NEW" in text
    text, status = compare(pd.DataFrame([row(device="cpu")]),
                           pd.DataFrame([row(device="cuda:0", verdict="fail")]),
                           allow_missing=("*/cpu",))
    assert status == 0 and "accepted by --allow-missing" in text


def test_compare_lists_suspicious_p_effect_and_speed(tmp_path, capsys):
    changes = {("normal-2sigma", "gof"): {"p_value_stage1": 1e-5, "effect": 0.3},
               ("tail-5", "bounds"): {"candidate_s": 1.0}}
    base, new = _base_new(tmp_path, changes)
    assert cli(["compare", base, new]) == 0
    out = capsys.readouterr().out
    sus = out.split("## Stage-1 p-value became suspicious (1)")[1].split("##")[0]
    assert "`normal-2sigma` float32 cpu **gof**" in sus
    eff = out.split("## Large changes of effect (1)")[1].split("##")[0]
    assert "0.01 → 0.3 sigma" in eff
    assert "slower" in out.split("## Throughput")[1]


def test_compare_warns_on_throughput_drops_and_gates_only_when_asked(tmp_path, capsys):
    """Throughput relative to torch's normal_ on the same machine: tail-5 fell 2.5x (listed),
    normal-2sigma 1.7x (not listed); the gate needs --gate-throughput."""
    changes = {(c, k): {"speed_vs_normal": v} for c, v in (("tail-5", 0.2), ("normal-2sigma", 0.3))
               for k in ("bounds", "gof")}
    base = [row(c, "float32", k, speed_vs_normal=0.5) for c in ("normal-2sigma", "tail-5")
            for k in ("bounds", "gof")]
    new = [dict(r, **changes.get((r["case"], r["check"]), {})) for r in base]
    b, n = _dir(tmp_path, "base", base), _dir(tmp_path, "new", new)
    assert cli(["compare", b, n]) == 0
    out = capsys.readouterr().out
    drops = out.split("## Throughput drops (more than 2x slower per case) (1)")[1].split("##")[0]
    assert "`tail-5` float32 cpu" in drops and "÷2.5" in drops and "warning" in drops
    assert "normal-2sigma" not in drops
    assert cli(["compare", "--gate-throughput", b, n]) == 1
    assert "1 throughput drop(s)" in capsys.readouterr().out


def test_budget_limited_cases_are_marked_with_their_mde(tmp_path):
    rows = [row("deep-window-10-1000", "bfloat16", k, budget_limited=True, n_stage1=196608,
                n_target=1 << 22, mde=m, effect_unit=u)
            for k, m, u in (("gof", 0.05, "w"), ("atoms", 2.1, "obs/exp"), ("finite", math.nan, ""))]
    rows += [row("normal-2sigma", "bfloat16", "gof", budget_limited=False, n_target=1 << 22)]
    d = _dir(tmp_path, "run", rows)
    text = open(os.path.join(d, "summary.md"), encoding="utf-8").read()
    assert "| deep-window-10-1000 | ✔ ⏱ |" in text and "| normal-2sigma | ✔ |" in text
    line = next(x for x in text.splitlines() if x.startswith("- ⏱"))
    assert "`deep-window-10-1000` bfloat16: n 196,608 of 4,194,304 (4.7%)" in line
    assert "MDE at that n: atoms 2.1 obs/exp, gof 0.05 w" in line
    page = open(os.path.join(d, "index.html"), encoding="utf-8").read()
    assert "Budget-limited (1)" in page and "196,608" in page and "⏱" in page


def test_compare_unreadable_exits_2_without_traceback(tmp_path):
    base, _ = _base_new(tmp_path, {})
    empty = tmp_path / "empty"
    empty.mkdir()
    missing = str(tmp_path / "missing")
    p = subprocess.run([sys.executable, "-m", "reports", "compare", base, missing], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert missing in p.stderr and p.stdout == ""
    assert cli(["compare", str(empty), base]) == 2
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "results.parquet").write_bytes(b"not parquet")
    assert cli(["compare", base, str(broken)]) == 2


def test_merge_shards(tmp_path, capsys):
    rows = crafted_rows()
    a = _dir(tmp_path, "a", [r for r in rows if r["dtype"] == "float32"])
    # Shard b repeats one row of a unchanged but for time and worker: allowed.
    dup = dict(next(r for r in rows if r["dtype"] == "float32"), candidate_s=9.0, worker="gw7")
    b = _dir(tmp_path, "b", [r for r in rows if r["dtype"] != "float32"] + [dup])
    out = str(tmp_path / "merged")
    assert cli(["merge", a, b, "--out", out]) == 0
    merged = read_results(out)
    assert len(merged) == len(rows)
    assert (tmp_path / "merged" / "summary.md").is_file() and (tmp_path / "merged" / "index.html").is_file()
    assert len(read_environment(out)["merged_from"]) == 2
    capsys.readouterr()
    assert cli(["show", out]) == 0
    assert "| abs-bounds-trap | ✔ | unrated |" in capsys.readouterr().out
    # The same key with another verdict: an error naming the key and the column.
    c = _dir(tmp_path, "c", [dict(dup, verdict="fail", p_value=1e-9)])
    assert cli(["merge", a, c, "--out", str(tmp_path / "m2")]) == 2
    err = capsys.readouterr().err
    assert "duplicate row" in err and "verdict" in err and len(err.strip().splitlines()) == 1


def test_merge_refuses_reports_graded_at_other_harm_thresholds(tmp_path, capsys):
    """Levels graded at other thresholds do not mix in one report: the merge names the threshold
    that differs and fails; a report written before the thresholds existed is not compared."""
    from harness.diagnosis import DEFAULT_THRESHOLDS, parse_thresholds

    rows = crafted_rows()
    ours, theirs = DEFAULT_THRESHOLDS.as_dict(), parse_thresholds("moved@0.5=0.05").as_dict()

    def report(name, part, thresholds):
        d = tmp_path / name
        write_run([r for r in rows if (r["dtype"] == "float32") == part], str(d),
                  run={} if thresholds is None else {"harm_thresholds": thresholds})
        return str(d)

    a, b = report("a", True, ours), report("b", False, theirs)
    capsys.readouterr()
    assert cli(["merge", a, b, "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "graded their levels at other harm thresholds" in err[0], err
    assert "harm_thresholds moved@0.5 0.03 vs 0.05" in err[0] and a in err[0] and b in err[0]
    assert not (tmp_path / "m" / "results.parquet").exists()
    # the same thresholds, or one report that records none, merge as before
    same, old = report("same", False, ours), report("old", False, None)
    for other in (same, old):
        assert cli(["merge", a, other, "--out", str(tmp_path / f"m-{os.path.basename(other)}")]) == 0
        merged = read_environment(str(tmp_path / f"m-{os.path.basename(other)}"))
        assert merged.get("harm_thresholds") == (ours if other == same else None)


# ------------------------------------------------------------------------------------------------
# A real tiny run through the plugin


def _harness_runs() -> bool:
    try:
        import reference
        from candidates import resolve

        resolve("exact")
    except Exception:
        return False
    return all(hasattr(reference, name) for name in ("TruncatedNormal", "rounded_law"))


@pytest.mark.skipif(not _harness_runs(), reason="reference/candidates not importable yet")
def test_real_tiny_run(tmp_path, capsys):
    """The exact sampler and one that puts 1e-4 of its mass on a, on the bf16 bug's case."""
    d = tmp_path / "run"
    cmd = [sys.executable, "-m", "pytest", "suites", "--candidate", "exact", "--candidate",
           "point-mass-1e-4-at-a", "--profile", "smoke", "--cases", "abs-bounds-trap", "--dtypes",
           "bfloat16", "-p", "no:cacheprovider", "-q", "--report-dir", str(d)]
    from harness.fleet.partition import PARTITION_VARIABLES

    env = {k: v for k, v in os.environ.items() if k not in PARTITION_VARIABLES}  # the whole grid
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert (d / "results.parquet").is_file(), p.stdout[-3000:] + p.stderr[-3000:]
    assert not (d / "views-error.txt").exists()
    df = read_results(str(d))
    assert set(df["case"]) <= {"abs-bounds-trap", "api"} and set(df["dtype"]) == {"bfloat16"}
    # exact passes: each statistical check's two-stage false alarm is <= 1e-6, and the run seed
    # is fixed (bf16 RN of the float64 draw: the same bits on every machine, but for a float64
    # last-bit difference landing on a bf16 midpoint, ~2^-44 per sample)
    assert grid(df, "exact").loc["abs-bounds-trap", "bfloat16"] == "pass"
    # point mass: 7 hits at a = -100 sigma expected in the 70 000 stage-1 samples (e^-7 = 1e-3 of
    # none), any one decisive. Deterministic: the hits are torch.rand float64 draws < 1e-4 from
    # the fixed run seed's generator, the same bits on every x86 CPU and thread count.
    failing = grid(df, "point-mass-1e-4-at-a").loc["abs-bounds-trap", "bfloat16"]
    assert is_level_cell(failing)  # the cell shows the worst level of its fail rows
    text = (d / "summary.md").read_text(encoding="utf-8")
    assert f"| abs-bounds-trap | {cell_text(failing)} |" in text and "Environment:" in text
    assert ("--candidate point-mass-1e-4-at-a --cases abs-bounds-trap --shapes none --paths eager "
            "--dtypes bfloat16") in text
    env = read_environment(str(d))
    assert env["profile"] == "smoke" and env["alpha_fail"] and env["run_seed"] is not None
    assert (d / "index.html").is_file()
    if list((d / CASE_DATA_DIR).glob("*.npz")):  # once the plugin saves figure data
        assert list(d.glob("fig-point-mass-1e-4-at-a-abs-bounds-trap-bfloat16-*.png"))
    assert cli(["show", str(d)]) == 0
    # The gate on real rows: the exact sampler as BASE, the point mass as NEW (other names).
    base, new = tmp_path / "base", tmp_path / "new"
    os.makedirs(base)
    os.makedirs(new)
    df[df["candidate"] == "exact"].to_csv(base / "results.csv", index=False)
    df[df["candidate"] != "exact"].to_csv(new / "results.csv", index=False)
    capsys.readouterr()
    assert cli(["compare", str(base), str(new)]) == 1
    assert "abs-bounds-trap` bfloat16 cpu **gof**" in capsys.readouterr().out
    assert cli(["compare", str(new), str(base)]) == 0


def test_the_bits_of_randomness_figure_in_every_view(tmp_path):
    """A collisions row's figure is a column of the table, a line of summary.md (failing groups
    first) and a row of index.html's "Bits of randomness" table, next to the law's own figure."""
    import html

    from reports.html import index_html
    from record.store import read_results, results_frame, write_tables
    from reports.overview import summary_markdown

    figure_bad = "≈ 2^23.0 equally likely values (95% CI 2^22.9 .. 2^23.1), where the law's own figure is 2^26.0"
    figure_ok = "≈ 2^26.0 equally likely values (95% CI 2^25.9 .. 2^26.1), where the law's own figure is 2^26.0"
    rows = [row(check="collisions", verdict="pass", resolution=figure_ok, bits=26.0, bits_lo=25.9,
                bits_hi=26.1, law_bits=26.0, case="huge-std"),
            row(check="collisions", verdict="fail", resolution=figure_bad, bits=23.0, bits_lo=22.9,
                bits_hi=23.1, law_bits=26.0),
            row(check="gof", dtype="bfloat16")]
    df = results_frame(rows)
    write_tables(df, str(tmp_path))
    back = read_results(str(tmp_path))
    got = back[back["check"] == "collisions"].set_index("case")
    assert got.loc["normal-2sigma", "bits"] == 23.0 and got.loc["normal-2sigma", "law_bits"] == 26.0
    assert got.loc["normal-2sigma", "resolution"] == figure_bad
    md = summary_markdown(back, {})
    lines = [line for line in md.splitlines() if "equally likely values" in line]
    assert lines[0] == f"- ✘ `normal-2sigma` float32: {figure_bad}" and len(lines) == 2
    page = index_html(back, {})
    assert "Bits of randomness (2)" in page and html.escape(figure_bad) in page
