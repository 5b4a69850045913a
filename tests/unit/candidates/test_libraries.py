"""Self-tests of the library adapters (`candidates.libraries`).

What holds whether or not the libraries are installed: resolving an adapter imports no library;
a missing library makes every test of its candidate a skip whose reason names the package; a
fixed-±2σ sampler is asked only for the ±2σ cases (the plugin skips the others with the reason,
and the `arguments` check probes nothing it cannot express); bit-exact copies. Where a library is
installed (each test skips cleanly otherwise): same harness seed → same bits, successive calls
differ, the caller's global RNG is left alone, and a short end-to-end run of the suites produces
verdicts and no `error` row. No mocks of the libraries: the missing-library case hides a real
module (``sys.modules[name] = None``, as Python does for a module known not to exist).
"""

from __future__ import annotations

import importlib.util
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from candidates import CandidateNotFound, registered_names, resolve
from candidates.libraries import LIBRARIES
from candidates.libraries.common import draw_seed, fixed_two_sigma, to_torch, zero_mean
from harness.cases import GRID, case_by_id

ROOT = Path(__file__).resolve().parents[3]
LIBRARY_MODULES = ("jax", "keras", "tensorflow", "timm", "paddle", "flax", "mlx.core", "numpyro")
# The library each candidate needs in order to draw (keras-jax also needs jax).
NEEDS = {"jax": ("jax",), "jax-init": ("jax",), "keras-torch": ("keras",),
         "keras-jax": ("keras", "jax"), "keras-numpy": ("keras",), "tensorflow": ("tensorflow",),
         "tensorflow-param": ("tensorflow",), "timm": ("timm",), "timm-tf": ("timm",),
         "paddle": ("paddle",), "mlx": ("mlx.core",), "numpyro": ("numpyro", "jax")}

# What the skip reason must tell the user to install.
PACKAGE = {"jax": "jax[cpu]", "jax-init": "jax[cpu]", "keras-torch": "keras", "keras-jax": "keras",
           "keras-numpy": "keras", "tensorflow": "tensorflow-cpu", "tensorflow-param": "tensorflow-cpu",
           "timm": "timm", "paddle": "paddlepaddle", "timm-tf": "timm", "mlx": "mlx[cpu]",
           "numpyro": "numpyro"}


def installed(name: str) -> bool:
    try:
        return all(importlib.util.find_spec(m) is not None for m in NEEDS[name])
    except ModuleNotFoundError:  # "mlx.core" without "mlx": find_spec imports the parent
        return False


def run_python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------- registry and lazy imports


def test_every_issue_13_candidate_is_registered_and_listed():
    names = registered_names()
    for name in NEEDS:
        assert name in LIBRARIES and name in names
    assert set(NEEDS) == set(LIBRARIES)


def test_resolving_imports_no_library():
    """Listing and resolving every adapter (with or without the library) imports none of them."""
    proc = run_python(f"""
        import sys
        import candidates
        names = candidates.registered_names()
        assert not any(m.startswith("candidates.libraries.") for m in sys.modules), "listing imported an adapter"
        for name in {list(LIBRARIES)!r}:
            c = candidates.resolve(name)
            assert c.name == name and c.spec == name, c
        loaded = sorted(m for m in {LIBRARY_MODULES!r} if m in sys.modules)
        print("LOADED", loaded)
    """)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "LOADED []" in proc.stdout


@pytest.mark.parametrize("name", list(LIBRARIES))
def test_missing_library_resolves_and_every_test_is_a_skip_naming_the_package(name, monkeypatch):
    # Hide the library as Python does for a module known to be absent (sys.modules[name] = None).
    for module in NEEDS[name]:
        monkeypatch.setitem(sys.modules, module, None)
    cand = resolve(name)
    reason = cand.skip_reason(torch.float32, "cpu", case_by_id("normal-2sigma"))
    assert reason is not None and "pip install" in reason and "\n" not in reason
    assert PACKAGE[name] in reason, reason
    assert cand.skip_reason(torch.bfloat16, "cpu") == reason  # the API check too (no case)


def test_missing_library_skips_the_whole_run_end_to_end(tmp_path):
    """The plugin turns `unavailable` into skips (here: jax hidden by a plugin)."""
    (tmp_path / "hide_jax.py").write_text("import sys\nsys.modules['jax'] = None\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "-p", "hide_jax", "-p", "no:cacheprovider",
         "--candidate", "jax", "--profile", "smoke", "--cases", "normal-2sigma", "--dtypes",
         "float32", "-q", "-rs", "--report-dir", str(tmp_path / "report")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    df = pd.read_csv(tmp_path / "report" / "results.csv")
    assert set(df.verdict) == {"skip"}
    assert df.message.str.contains("pip install 'jax\\[cpu\\]'").all(), df.message.iloc[0]


def test_unknown_library_name_is_still_a_one_line_error():
    with pytest.raises(CandidateNotFound) as info:
        resolve("keras-tensorflow-typo")
    assert "keras-torch" in str(info.value) and "\n" not in str(info.value)


# --------------------------------------------------------------------------- capability rules


def test_fixed_two_sigma_expresses_exactly_the_four_two_sigma_cases():
    expressible = {c.id for c in GRID if fixed_two_sigma(c.mean, c.std, c.a, c.b) is None}
    assert expressible == {"normal-2sigma", "vit-pos-embed", "tiny-std", "large-mean"}
    reason = fixed_two_sigma(0.0, 1.0, 1.0, 3.0)
    assert "fixed at mean ± 2 std" in reason and "[1, 3]" in reason


def test_zero_mean_rule():
    assert {c.id for c in GRID if zero_mean(c.mean, c.std, c.a, c.b) is not None} == {
        "tiny-std", "large-mean"}
    assert zero_mean(math.nan, 1.0, -2.0, 2.0) is not None


@pytest.mark.parametrize("name", ["keras-torch", "keras-jax", "keras-numpy", "tensorflow"])
def test_fixed_two_sigma_adapters_declare_it(name):
    cand = resolve(name)
    for case in GRID:
        expected = fixed_two_sigma(case.mean, case.std, case.a, case.b)
        assert (cand.cannot_express(case.mean, case.std, case.a, case.b) is None) == (expected is None)


def test_plugin_skips_cases_a_candidate_cannot_express(tmp_path):
    """End to end with a generic fixed-±2σ sampler (no library): the ±2σ case runs, the others
    are skipped with the reason, and `arguments` is a skip (no invalid probe is expressible)."""
    sampler = tmp_path / "two_sigma.py"
    sampler.write_text(textwrap.dedent("""
        from candidates import candidate
        from candidates.builtin import exact_trunc_normal_
        from candidates.libraries.common import fixed_two_sigma

        @candidate(expresses=fixed_two_sigma)
        def two_sigma_only(tensor, mean, std, a, b, generator=None):
            assert fixed_two_sigma(mean, std, a, b) is None, "called outside its cases"
            return exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)
    """))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", "--candidate",
         f"{sampler}:two_sigma_only", "--profile", "smoke", "--samples", "4096", "--cases",
         "normal-2sigma,asym-window-1-3", "--dtypes", "float32", "-q",
         "--report-dir", str(tmp_path / "report")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    df = pd.read_csv(tmp_path / "report" / "results.csv")
    two = df[df.case == "normal-2sigma"]
    # exact samples: each statistical check fails with probability <= 1e-6 (two stages), the
    # run seed is fixed (float32 RN of the float64 draw: machine-independent but for a last-bit
    # difference on a float32 midpoint, ~2^-29 per sample)
    assert set(two.verdict) <= {"pass", "skip"} and (two.verdict == "pass").sum() >= 10
    asym = df[df.case == "asym-window-1-3"]
    assert set(asym.verdict) == {"skip"}
    assert asym.message.str.contains("cannot express asym-window-1-3: bounds are fixed at mean").all()
    args = df[df.check == "arguments"]
    assert list(args.verdict) == ["skip"] and "cannot be asked for any invalid" in args.message.iloc[0]


# ----------------------------------------------------------------------------- bits and seeds


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
def test_to_torch_copies_bits_and_refuses_another_dtype(dtype):
    ref = torch.randn(5, 7, dtype=torch.float64).to(dtype)
    ref[0, 0] = -0.0
    if dtype == torch.bfloat16:
        arr = ref.view(torch.int16).numpy().view(np.uint16)  # bfloat16 bit patterns
    else:
        arr = ref.numpy()
    out = to_torch(arr, dtype, (5, 7), "lib")
    bits = {torch.float64: torch.int64, torch.float32: torch.int32}.get(dtype, torch.int16)
    assert out.dtype == dtype and torch.equal(out.view(bits), ref.view(bits))
    assert to_torch(np.asarray(arr[0, 0]), dtype, (), "lib").shape == ()  # 0-d stays 0-d
    other = torch.float32 if dtype != torch.float32 else torch.float64
    with pytest.raises(TypeError, match="returned"):
        to_torch(arr, other, (5, 7), "lib")


def test_draw_seed_advances_the_generator():
    g = torch.Generator().manual_seed(3)
    seeds = [draw_seed(g) for _ in range(4)]
    assert len(set(seeds)) == 4 and all(0 <= s < 2**63 for s in seeds)
    assert [draw_seed(torch.Generator().manual_seed(3)) for _ in range(1)] == seeds[:1]
    assert all(0 <= draw_seed(g, bits=32) < 2**32 for _ in range(20))


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({8: torch.int64, 4: torch.int32, 2: torch.int16}[t.element_size()])


@pytest.mark.parametrize("name", list(LIBRARIES))
def test_seeded_from_the_harness_generator(name):
    if not installed(name):
        pytest.skip(f"{', '.join(NEEDS[name])} not installed")
    cand = resolve(name)
    assert cand.unavailable is None
    mean, std, a, b = 0.0, 1.0, -2.0, 2.0
    for dtype in (torch.float32, torch.bfloat16):
        if dtype not in cand.dtypes:
            continue
        before = torch.get_rng_state()

        def draws(seed):
            g = torch.Generator().manual_seed(seed)
            outs = [cand(torch.empty(16, 33, dtype=dtype), mean, std, a, b, g) for _ in range(2)]
            return [_bits(o).clone() for o in outs], g

        (first, second), g1 = draws(11)
        (again, _), g2 = draws(11)
        (other, _), _ = draws(12)
        assert torch.equal(first, again), f"{name} {dtype}: same seed, different bits"
        assert not torch.equal(first, second), f"{name} {dtype}: successive calls gave the same bits"
        assert not torch.equal(first, other), f"{name} {dtype}: seeds 11 and 12 gave the same bits"
        assert torch.equal(g1.get_state(), g2.get_state())
        assert not torch.equal(g1.get_state(), torch.Generator().manual_seed(11).get_state())
        assert torch.equal(before, torch.get_rng_state()), f"{name}: the global torch RNG changed"


@pytest.mark.parametrize("name", list(LIBRARIES))
def test_output_lands_in_the_tensor_in_bounds(name):
    if not installed(name):
        pytest.skip(f"{', '.join(NEEDS[name])} not installed")
    cand = resolve(name)
    base = torch.full((12, 10), 99.0)
    view = base[:, ::2].t()  # non-contiguous: the adapter copies into the view only
    assert cand(view, 0.0, 1.0, -2.0, 2.0, torch.Generator().manual_seed(0)) is view
    assert base[:, 1::2].eq(99.0).all()
    assert view.ne(99.0).all() and view.abs().max() <= 2.5  # keras-torch may exceed 2 (its defect)


# ----------------------------------------------------------------------------- end to end


E2E = [n for n in ("jax", "keras-torch", "timm", "timm-tf", "mlx", "numpyro") if installed(n)]


@pytest.mark.skipif(not E2E, reason="none of jax, keras, timm is installed")
def test_short_end_to_end_run_has_verdicts_and_no_error_rows(tmp_path):
    """The CI step's command, shortened: the installed libraries through two cases."""
    args = [a for n in E2E for a in ("--candidate", n)]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites", "-p", "no:cacheprovider", *args, "--profile",
         "smoke", "--samples", "16384", "--cases", "normal-2sigma,asym-window-1-3", "--dtypes",
         "float32,bfloat16", "-q", "--report-dir", str(tmp_path / "report")],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
        timeout=600)
    assert proc.returncode in (0, 1), proc.stdout[-3000:]  # 1: a library fails a check (a finding)
    df = pd.read_csv(tmp_path / "report" / "results.csv")
    assert (df.verdict == "error").sum() == 0, df[df.verdict == "error"][["candidate", "message"]]
    assert set(df.candidate) == set(E2E)
    for name in E2E:
        rows = df[df.candidate == name]
        assert (rows.verdict == "pass").sum() > 0, name
    if "keras-torch" in E2E:
        keras = df[df.candidate == "keras-torch"]
        assert set(keras[keras.case == "asym-window-1-3"].verdict) == {"skip"}


# ------------------------------------------------------------------------- prepare (start-up)


class _VirtualClock:
    """Stands in for the `time` module of harness.engine.draw: perf_counter moves only when the
    test's start-up or candidate says so (a wall clock would make the assertion depend on how
    busy the machine is)."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_engine_runs_prepare_once_outside_the_candidate_time(monkeypatch):
    """A library's start-up (import, child process) is not candidate time: it would otherwise be
    spent out of the per-case budget of the first case each worker runs."""
    from candidates.builtin import exact_trunc_normal_
    from candidates.protocol import Candidate
    from harness.checks import CHECKS
    from harness.engine import CandidateFailure, draw, run_engine
    from reference import TruncatedNormal, rounded_law

    calls = []
    clock = _VirtualClock()
    monkeypatch.setattr(draw, "time", clock)

    def slow_start():
        calls.append(1)
        clock.now += 0.5  # a 0.5 s start-up, on the engine's clock

    def timed(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
        clock.now += 0.001  # 1 ms per call
        return exact_trunc_normal_(tensor, mean, std, a, b, generator)

    case = case_by_id("normal-2sigma")
    law = rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), torch.float32)
    cand = Candidate(timed, name="slow-start", prepare=slow_start)
    summary = run_engine(cand, case, torch.float32, "cpu", law, 2 * case.numel, seed=1,
                         families=CHECKS.families())
    # deterministic (virtual clock): two calls of 1 ms; with the start-up counted it would be 0.502
    assert calls == [1] and summary.candidate_s == pytest.approx(0.002) and summary.n == 2 * case.numel

    def broken_start():
        raise RuntimeError("library failed to start")

    cand = Candidate(exact_trunc_normal_, name="broken-start", prepare=broken_start)
    with pytest.raises(CandidateFailure) as info:
        run_engine(cand, case, torch.float32, "cpu", law, case.numel, seed=1,
                   families=CHECKS.families())
    assert info.value.kind == "raised" and "library failed to start" in str(info.value)


@pytest.mark.parametrize("name", list(LIBRARIES))
def test_every_library_candidate_declares_its_start_up(name):
    assert callable(resolve(name).prepare)


def test_arguments_check_runs_the_start_up_before_its_probes():
    """A library's start-up (import, first compile: ~16 s for NumPyro on a busy machine) must not
    be the first probe's time, or the probe reads as hung."""
    from candidates.builtin import exact_trunc_normal_
    from candidates.protocol import Candidate
    from harness.checks.contract import check_arguments

    order = []

    def sampler(tensor, mean, std, a, b, generator=None):
        order.append("call")
        return exact_trunc_normal_(tensor, mean, std, a, b, generator=generator)

    cand = Candidate(sampler, name="with-start-up", prepare=lambda: order.append("prepare"))
    check_arguments(cand, torch.float32, "cpu", seed=1, timeout=10.0)
    assert order[0] == "prepare" and order.count("prepare") == 1 and "call" in order
