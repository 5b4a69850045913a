"""Self-tests of the failure map (reports.map, `python -m reports map`), its section of index.html
and the "Failure regions" of summary.md, on crafted rows and a crafted boundaries.json (no
sampling; deterministic)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from record.store import read_results
from reports import map as M
from reports.__main__ import main as cli
from reports.render import write_run

from report_rows import row

ROOT = str(Path(__file__).resolve().parents[3])
DTYPES = ("float64", "float32", "float16", "bfloat16")
CHECKS = ("finite", "bounds", "gof", "ks")


def case_rows(case, mean, std, a, b, dtypes=DTYPES, fail=None, standardized=True, **kw):
    """Every check of one case in each dtype; `fail`: {dtype: {check: p}} failing rows."""
    extra = {}
    if standardized:
        with np.errstate(divide="ignore", invalid="ignore"):
            extra = {"alpha": (a - mean) / std, "beta": (b - mean) / std}
    out = []
    for dtype in dtypes:
        for check in CHECKS:
            p = (fail or {}).get(dtype, {}).get(check)
            verdict = "pass" if p is None else "fail"
            out.append(row(case, dtype, check, verdict, mean=mean, std=std, a=a, b=b,
                           p_value=0.5 if p is None else p, **extra, **kw))
    return out


def explored_rows() -> list[dict]:
    rows = []
    rng = np.random.default_rng(7)  # a fixed crafted design, not the harness's Sobol draw
    for i in range(24):
        alpha = float(rng.uniform(-40, 40))
        width = float(10 ** rng.uniform(-6, 1.5))
        mean, std = float(rng.uniform(-1e4, 1e4)), float(10 ** rng.uniform(-8, 4))
        a, b = mean + alpha * std, mean + (alpha + width) * std
        fail = {"bfloat16": {"gof": 1e-12, "ks": 1e-5}} if alpha > 20 else None
        rows += case_rows(f"explore-7-{i:04d}", mean, std, a, b, fail=fail)
    # ±∞ bounds: the untruncated law, a one-sided tail; one failing in float16 with p = 0.
    rows += case_rows("explore-7-0100", 3.0, 2.0, -math.inf, math.inf)
    rows += case_rows("explore-7-0101", -50.0, 0.5, -49.0, math.inf,
                      fail={"float16": {"bounds": 0.0, "gof": 1e-40}})
    # A case without the harness's alpha/beta columns: computed from a, b, mean, std.
    rows += case_rows("explore-7-0102", 10.0, 2.0, 12.0, 18.0, standardized=False)
    # Grid cases: a plain one, the absolute-bounds trap at ±100σ (beyond ±40: clipped), failing
    # (opaque diamond) in bfloat16 only; a shape-axis group and the API rows stay off the map.
    rows += case_rows("normal-2sigma", 0.0, 1.0, -2.0, 2.0)
    rows += case_rows("abs-bounds-trap", 0.0, 0.02, -2.0, 2.0,
                      fail={"bfloat16": {"bounds": 0.0}})
    rows += case_rows("normal-2sigma:61x67", 0.0, 1.0, -2.0, 2.0)
    rows.append(row("api", "float32", "arguments", "pass", mean=None, std=None, a=None, b=None))
    return rows


BOUNDARY_POINT = {"mean": -50.0, "std": 0.5, "alpha": 2.0, "beta": math.inf}


def boundaries(n_extra: int = 0) -> list[dict]:
    base = {"case": "explore-7-0101", "dtype": "float16", "failing": 2.1, "passing": 1.9,
            "point": BOUNDARY_POINT, "repro": "pytest suites --case 'mean=-50,std=0.5,a=-49,b=inf' "
                                              "--dtypes float16"}
    items = [dict(base, parameter="alpha", boundary=1.5, direction=">=",
                  line="fails for α ≥ 1.5 when β = +∞, σ = 0.5, μ = −50 (float16)"),
             dict(base, parameter="beta", boundary=30.0, direction=">=",
                  point=dict(BOUNDARY_POINT, beta=35.0),
                  line="fails for β ≥ 30 when α = 2, σ = 0.5, μ = −50 (float16)"),
             dict(base, parameter="log_std", boundary=-3.0, direction="<=",
                  line="fails for log σ ≤ −3 when α = 2, β = +∞, μ = −50 (float16)"),
             dict(base, parameter="mean", boundary=-20.0, direction="<=",
                  line="fails for μ ≤ −20 when α = 2, β = +∞, σ = 0.5 (float16)")]
    for i in range(n_extra):
        items.append(dict(base, parameter="alpha", boundary=1.0 + i / 100, direction=">=",
                          line=f"fails for α ≥ {1.0 + i / 100:g} (extra {i}, float16)"))
    return items


RUN = {"cases": ["normal-2sigma", "abs-bounds-trap"], "explore": {"n": 27, "seed": 7, "fwer": 0.01}}


def make_report(d: Path, rows, items=None, run=RUN) -> Path:
    os.makedirs(d, exist_ok=True)
    if items is not None:
        (d / M.BOUNDARIES).write_text(json.dumps(items), encoding="utf-8")
    write_run(rows, str(d), run)
    assert not (d / "views-error.txt").exists()
    return d


@pytest.fixture(scope="module")
def explored(tmp_path_factory):
    return make_report(tmp_path_factory.mktemp("explored") / "r", explored_rows(), boundaries())


def _image(path):
    from matplotlib.image import imread

    return imread(str(path))


def _expected_pixels(nrows, ncols):
    w, h = M.figure_size(nrows, ncols)
    return round(h * M.DPI), round(w * M.DPI)


# ------------------------------------------------------------------------------------------------
# The points


def test_case_points_bounds_infinities_and_verdicts(explored):
    pts = M.case_points(read_results(str(explored))).set_index(["case", "dtype"])
    cases = set(pts.index.get_level_values(0))
    assert "api" not in cases and "normal-2sigma:61x67" not in cases
    assert {"normal-2sigma", "abs-bounds-trap", "explore-7-0100"} <= cases
    assert len(pts) == (24 + 3 + 2) * len(DTYPES)
    inf = pts.loc[("explore-7-0100", "float32")]
    assert inf["alpha"] == -math.inf and inf["beta"] == math.inf
    tail = pts.loc[("explore-7-0101", "float16")]
    assert tail["alpha"] == pytest.approx(2.0) and tail["beta"] == math.inf
    assert tail["verdict"] == "fail" and tail["nlp"] == M.P_CAP  # p = 0: the cap
    computed = pts.loc[("explore-7-0102", "float64")]  # no alpha/beta columns: from a, b, μ, σ
    assert (computed["alpha"], computed["beta"]) == (pytest.approx(1.0), pytest.approx(4.0))
    trap = pts.loc[("abs-bounds-trap", "bfloat16")]
    assert trap["alpha"] == pytest.approx(-100) and not trap["explored"]
    assert pts.loc[("abs-bounds-trap", "float32"), "verdict"] == "pass"
    assert math.isnan(pts.loc[("abs-bounds-trap", "float32"), "nlp"])
    failing = pts[pts["verdict"] == "fail"]
    explored_fail = failing[failing["explored"] & (failing.index.get_level_values(1) == "bfloat16")]
    assert len(explored_fail) and list(explored_fail["nlp"]) == pytest.approx([12.0] * len(explored_fail))  # smallest p
    np.testing.assert_array_equal(M.position([-math.inf, -100, -40, 3.5, 41, math.inf]),
                                  [-M.INF_AT, -M.CLIP_AT, -40, 3.5, M.CLIP_AT, M.INF_AT])
    sizes = M.marker_size([math.nan, 3.0, 30.0, M.P_CAP])
    assert sizes[0] == M.SIZE_MIN and sizes[-1] == M.SIZE_MAX and list(sizes) == sorted(sizes)


def test_worst_over_checks_includes_error_and_xfail(tmp_path):
    rows = case_rows("explore-1-0000", 0.0, 1.0, -1.0, 1.0, dtypes=("float32",))
    rows[0].update(verdict="error", p_value=math.nan)
    rows[1].update(verdict="fail", p_value=1e-7)
    rows += [dict(r, case="explore-1-0001") for r in case_rows("x", 0.0, 1.0, 0.0, 1.0,
                                                               dtypes=("float32",))]
    rows[-1].update(verdict="xfail")
    d = make_report(tmp_path / "r", rows)
    pts = M.case_points(read_results(str(d)))
    got = dict(zip(pts["case"], pts["verdict"]))
    assert got == {"explore-1-0000": "error", "explore-1-0001": "xfail"}
    nlp = dict(zip(pts["case"], pts["nlp"]))
    assert nlp["explore-1-0000"] == pytest.approx(7.0)  # the fail's p; the error has none


# ------------------------------------------------------------------------------------------------
# The PNG


def test_map_png_has_one_panel_per_dtype(explored):
    png = explored / M.MAP_NAME
    assert png.is_file()
    img = _image(png)
    assert img.shape[:2] == _expected_pixels(1, 4)
    assert img[..., :3].std() > 0.05  # not blank
    out = M.render_map(read_results(str(explored)), str(explored / "again.png"), {},
                       M.read_boundaries(str(explored)))
    assert out["panels"] == [("torch", d) for d in DTYPES]  # float64, float32, float16, bfloat16
    assert out["points"] == 29 * 4
    assert out["boundaries"] == 4  # α and β segments, log σ and μ notes
    # The failing grid case (an opaque diamond: the pure fail colour) is in the bfloat16 panel
    # only, the rightmost quarter of the panels (the legend below has an opaque fail dot too).
    top, bottom = M.TOP * M.DPI, (M.TOP + M.PANEL) * M.DPI
    rgb = img[int(top):int(bottom), :, :3]
    red = np.abs(rgb - np.array([0xd6, 0x27, 0x28]) / 255).max(axis=2) < 0.02
    cols = np.flatnonzero(red.any(axis=0))
    left_of_bf16 = (M.LEFT + 3 * (M.PANEL + M.GAP_W)) * M.DPI
    assert red.sum() > 20 and cols.min() >= left_of_bf16 - 5


def test_map_of_two_dtypes_and_two_candidates(tmp_path):
    rows = case_rows("explore-3-0000", 0.0, 1.0, 1.0, 2.0, dtypes=("bfloat16", "float32"),
                     fail={"bfloat16": {"gof": 1e-9}})
    rows += [dict(r, candidate="exact", verdict="pass") for r in rows]
    d = make_report(tmp_path / "r", rows)
    img = _image(d / M.MAP_NAME)
    assert img.shape[:2] == _expected_pixels(2, 2)
    out = M.render_map(read_results(str(d)), str(tmp_path / "m.png"))
    assert out["panels"] == [("exact", "float32"), ("exact", "bfloat16"),
                             ("torch", "float32"), ("torch", "bfloat16")]


def test_render_1000_points(tmp_path):
    """Not a timing assertion (speed lives in benchmarks): 1000 explored cases in four
    dtypes render, and the result is the expected image."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(1000):
        alpha = float(rng.uniform(-40, 40))
        beta = math.inf if i % 10 == 0 else alpha + float(10 ** rng.uniform(-6, 1.5))
        for dtype in DTYPES:
            verdict = "fail" if dtype == "bfloat16" and alpha > 25 else "pass"
            rows.append(row(f"explore-0-{i:04d}", dtype, "gof", verdict, mean=0.0, std=1.0,
                            a=alpha, b=beta, alpha=alpha, beta=beta,
                            p_value=1e-9 if verdict == "fail" else 0.5))
    from record.store import results_frame

    out = M.render_map(results_frame(rows), str(tmp_path / "m.png"), RUN)
    assert out["points"] == 4000
    assert _image(tmp_path / "m.png").shape[:2] == _expected_pixels(1, 4)


# ------------------------------------------------------------------------------------------------
# boundaries.json


def test_read_boundaries_missing_and_broken(tmp_path):
    assert M.read_boundaries(str(tmp_path)) == []
    (tmp_path / M.BOUNDARIES).write_text("[{", encoding="utf-8")
    with pytest.warns(UserWarning, match="unreadable"):
        assert M.read_boundaries(str(tmp_path)) == []
    good = boundaries()[0]
    (tmp_path / M.BOUNDARIES).write_text(json.dumps([good, {"case": "x"}, 3]), encoding="utf-8")
    with pytest.warns(UserWarning, match="2 item"):
        assert M.read_boundaries(str(tmp_path)) == [good]
    assert M.note_text(boundaries()[2]) == "log σ ≤ −3"


# ------------------------------------------------------------------------------------------------
# The command line


def test_cli_map_writes_and_prints_the_path(explored, tmp_path, capsys):
    out = tmp_path / "sub.png"
    assert cli(["map", str(explored), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert _image(out).shape[:2] == _expected_pixels(1, 4)
    os.remove(explored / M.MAP_NAME)
    assert cli(["map", str(explored)]) == 0
    assert capsys.readouterr().out.strip() == os.path.join(str(explored), M.MAP_NAME)
    assert (explored / M.MAP_NAME).is_file()


def test_cli_map_of_grid_only_report(tmp_path, capsys):
    d = make_report(tmp_path / "r", case_rows("normal-2sigma", 0.0, 1.0, -2.0, 2.0))
    assert not (d / M.MAP_NAME).exists()  # no explored rows: the report draws no map ...
    assert cli(["map", str(d)]) == 0  # ... but the command draws the grid
    assert _image(d / M.MAP_NAME).shape[:2] == _expected_pixels(1, 4)


def test_cli_map_exit_2(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    api_only = make_report(tmp_path / "api", [row("api", "float32", "arguments", mean=None,
                                                  std=None, a=None, b=None)])
    for d in (tmp_path / "missing", empty, api_only):
        assert cli(["map", str(d)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("reports map: ") and err.count("\n") == 1, err
        assert "Traceback" not in err
    assert not (empty / M.MAP_NAME).exists()


def test_cli_map_subprocess_exit_2_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "reports", "map", str(tmp_path / "nope")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "is not a directory" in proc.stderr


# ------------------------------------------------------------------------------------------------
# index.html and summary.md


def test_index_html_has_the_map_only_with_explored_rows(explored, tmp_path):
    page = (explored / "index.html").read_text(encoding="utf-8")
    assert "<h2 id='failure-map'>Failure map</h2>" in page
    assert f"<img src='{M.MAP_NAME}'" in page
    assert "27 explored case(s)" in page and "seed 7" in page and "0.01" in page
    assert "fails for α ≥ 1.5 when β = +∞" in page
    grid_only = make_report(tmp_path / "g", case_rows("normal-2sigma", 0.0, 1.0, -2.0, 2.0),
                            boundaries())
    page = (grid_only / "index.html").read_text(encoding="utf-8")
    assert "Failure map" not in page and M.MAP_NAME not in page
    assert not (grid_only / M.MAP_NAME).exists()


def test_broken_map_costs_only_the_map(tmp_path, monkeypatch):
    import reports.render as R

    def broken(*args, **kw):
        raise ValueError("boom")

    monkeypatch.setattr(R, "render_map", broken)
    d = tmp_path / "r"
    with pytest.warns(UserWarning, match="no failure map: ValueError: boom"):
        write_run(explored_rows(), str(d), RUN)
    assert not (d / "views-error.txt").exists()
    page = (d / "index.html").read_text(encoding="utf-8")
    assert "Failure map" not in page and "abs-bounds-trap" in page
    assert (d / "summary.md").is_file()


def test_summary_lists_failure_regions(explored, tmp_path):
    text = (explored / "summary.md").read_text(encoding="utf-8")
    section = text.split("## Failure regions (4)")[1].split("Environment:")[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("- ")]
    assert [ln.split(" · ")[0] for ln in lines] == ["- " + b["line"] for b in boundaries()]
    assert all("`pytest suites --case" in ln for ln in lines)
    assert "seed 7" in section
    many = make_report(tmp_path / "many", explored_rows(), boundaries(n_extra=9))
    text = (many / "summary.md").read_text(encoding="utf-8")
    section = text.split("## Failure regions (13)")[1].split("Environment:")[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("- ")]
    assert len(lines) == 11 and lines[-1] == "- … 3 more in index.html / boundaries.json"
    none = make_report(tmp_path / "none", explored_rows())
    assert "Failure regions" not in (none / "summary.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------
# Merged reports and `show`


def _input(d: Path, cases: set, items=None) -> str:
    """A report of the rows of `cases` (labels of explored_rows()), with `items` as its
    boundaries.json (None: no file, as a run without --explore leaves)."""
    return str(make_report(d, [r for r in explored_rows() if r["case"] in cases], items))


def test_merge_joins_the_boundaries_of_every_input(tmp_path, capsys):
    items = boundaries()
    # The inputs overlap on explore-7-0101 (agreeing rows), and so do their boundaries of it.
    a = _input(tmp_path / "a", {"explore-7-0101", "explore-7-0100"}, items[:3])
    b = _input(tmp_path / "b", {"explore-7-0101", "normal-2sigma"}, items[2:])
    out = tmp_path / "merged"
    assert cli(["merge", a, b, "--out", str(out)]) == 0
    assert M.read_boundaries(str(out)) == items  # each once, in input order
    capsys.readouterr()
    assert cli(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "## Failure regions (4)" in shown
    assert [shown.count(f"\n- {item['line']} · `pytest suites --case") for item in items] == [1] * 4
    # Inputs without boundaries: the merged report has none, not those of the earlier merge.
    grid = _input(tmp_path / "g", {"normal-2sigma"})
    assert cli(["merge", grid, "--out", str(out)]) == 0
    assert not (out / M.BOUNDARIES).exists()
    assert "Failure regions" not in (out / "summary.md").read_text(encoding="utf-8")


def test_show_rebuilt_without_summary_md_lists_the_boundaries(tmp_path, capsys):
    d = make_report(tmp_path / "r", explored_rows(), boundaries())
    os.remove(d / "summary.md")
    assert cli(["show", str(d)]) == 0
    shown = capsys.readouterr().out
    assert "## Failure regions (4)" in shown
    assert [shown.count(f"\n- {item['line']} · ") for item in boundaries()] == [1] * 4
