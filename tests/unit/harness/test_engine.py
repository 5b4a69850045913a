"""The streaming engine: bit-exact histogram keys, poison, counts, chunk invariance, deadlines."""

from __future__ import annotations

import functools
import math
import time
import types

import numpy as np
import pytest
import torch

from candidates import resolve
from harness import engine
from harness.key_bins import ordered_from_raw, raw_to_ordered
from harness.cases import Case, case_by_id
from harness.checks import CHECKS, summarize_samples
from harness.engine import (CandidateFailure, INT_VIEW, call_deadline, dtype_bits,
                            is_budget_stop, normal_throughput, poison_)
from harness.engine.bits import VIEWS, make_target
from harness.families.extremes import ROW_EXTREMES_CAP
from reference import TruncatedNormal, float_format, rounded_law

#: The engine's draw through the families of a grid group's checks, as the runner calls it.
run_engine = functools.partial(engine.run_engine, families=CHECKS.families())

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


def _law(case, dtype):
    return rounded_law(TruncatedNormal(case.mean, case.std, case.a, case.b), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_histogram_bins_are_the_reference_ordered_key_bins(dtype):
    """Random bit patterns (NaN and inf included) land in the bin of their ordered key."""
    fmt = float_format(dtype)
    bits = dtype_bits(dtype)
    g = torch.Generator().manual_seed(1)
    raw = torch.randint(-2**62, 2**62, (200_000,), generator=g, dtype=torch.int64)
    ints = raw.to(INT_VIEW[bits]) if bits < 64 else raw
    special = torch.tensor([0.0, -0.0, math.inf, -math.inf, 1.0, -1.0], dtype=dtype)
    ints = torch.cat([ints, special.view(INT_VIEW[bits])])
    case = case_by_id("normal-2sigma")
    s = summarize_samples(ints.view(dtype).reshape(1, -1), _law(case, dtype))
    patterns = ints.numpy().astype(np.int64) & ((1 << bits) - 1) if bits < 64 else ints.numpy()
    keys = fmt.keys_from_bits(patterns.astype(np.uint64))
    expected = np.bincount((keys >> np.uint64(bits - fmt.hist_bits)).astype(np.int64),
                           minlength=1 << fmt.hist_bits)
    assert np.array_equal(s.binned.hist, expected)
    lo, hi = fmt.hist_bin_bounds()
    v = ints.view(dtype).to(torch.float64).numpy()
    finite = np.isfinite(v)
    k = (keys >> np.uint64(bits - fmt.hist_bits)).astype(np.int64)
    assert np.all(lo[k[finite]] <= v[finite]) and np.all(v[finite] <= hi[k[finite]])


FINE_CASES = [Case("narrow-8", 0.0, 1.0, 8.0, 8.01, (64,)),
              Case("narrow-minus-8", 0.0, 1.0, -8.01, -8.0, (64,)),
              Case("tiny-std", 0.5, 1e-6, 0.5 - 2e-6, 0.5 + 2e-6, (64,))]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("case", FINE_CASES, ids=lambda c: c.id)
def test_fine_bins_of_a_narrow_law_are_its_ordered_key_ranges(case, dtype):
    """Samples of the law, neighbours just outside, random patterns (NaN, inf, poison): each lands
    in the fine bin of its ordered key, or in the bin below / above."""
    law = _law(case, dtype)
    fb = law.fine_bins
    assert fb is not None and fb.n_bins > 100
    fmt, bits = law.fmt, dtype_bits(dtype)
    g = torch.Generator().manual_seed(5)
    inside = torch.empty(20_000, dtype=dtype)
    resolve("exact")(inside, case.mean, case.std, case.a, case.b, g)
    edges = torch.tensor(np.r_[fmt.next_down(law.support_lo), law.support_lo, law.support_hi,
                               fmt.next_up(law.support_hi), 0.0, -0.0, np.inf, -np.inf],
                         dtype=dtype)
    raw = torch.randint(-2**62, 2**62, (5000,), generator=g, dtype=torch.int64)
    noise = (raw.to(INT_VIEW[bits]) if bits < 64 else raw).view(dtype)
    x = torch.cat([inside, edges, noise, poison_(torch.empty(7, dtype=dtype))])
    s = summarize_samples(x.reshape(1, -1), law)
    patterns = x.view(INT_VIEW[bits]).numpy().astype(np.int64)
    keys = fmt.keys_from_bits((patterns & ((1 << bits) - 1) if bits < 64 else patterns)
                              .astype(np.uint64)).astype(object)
    index = [0 if k < fb.key_lo else fb.n_bins + 1 if k >= fb.key_end
             else ((k - fb.key_lo) >> fb.shift) + 1 for k in keys]
    assert np.array_equal(s.binned.fine_hist, np.bincount(index, minlength=fb.n_bins + 2))
    assert s.binned.fine_hist[1:-1].sum() >= inside.numel() + 2  # the two support ends are inside
    lo, hi = law.fine_bin_bounds()
    v = inside.to(torch.float64).numpy()
    k = np.searchsorted(hi, v)  # bins are increasing, contiguous ranges of values
    assert np.all(lo[k] <= v) and np.all(v <= hi[k])


def test_wide_laws_have_no_fine_bins():
    for cid in ("normal-2sigma", "half-normal", "huge-std", "untruncated"):
        for dtype in DTYPES:
            law = _law(case_by_id(cid), dtype)
            assert law.fine_bins is None
            assert summarize_samples(torch.zeros(1, 4, dtype=dtype), law).binned.fine_hist is None


def test_ordered_from_raw_is_the_scatter_by_raw_to_ordered():
    for bits in (1, 4, 16, 20):
        raw = np.random.default_rng(bits).integers(0, 1000, 1 << bits)
        scattered = np.zeros_like(raw)
        scattered[raw_to_ordered(bits)] = raw
        assert np.array_equal(ordered_from_raw(raw), scattered)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_poison_is_a_nan_that_counts_as_unwritten_not_as_nan(dtype):
    case = case_by_id("normal-2sigma")
    law = _law(case, dtype)
    t = poison_(torch.empty((3, 4), dtype=dtype))
    assert torch.isnan(t).all()
    t[0].fill_(0.5)
    t[1, 0] = math.nan
    s = summarize_samples(t.unsqueeze(0), law)
    assert s.n == 12 and s.support.n_unwritten == 7 and s.support.n_nan == 1 and s.binned.hist.sum() == 12


def test_counts_at_and_outside_the_bounds():
    case = Case("t", 0.0, 1.0, -1.0, 1.0, (2, 4))
    law = _law(case, torch.float32)
    x = torch.tensor([[-1.0, 1.0, 1.0, 0.0], [2.0, -3.0, math.inf, 0.25]])
    s = summarize_samples(x.unsqueeze(0), law)
    assert (s.atoms.n_at_rn_a, s.atoms.n_at_rn_b, s.support.n_outside_rounded, s.support.n_posinf) == (1, 2, 2, 1)
    assert s.support.worst_outside == -3.0 and s.support.min == -3.0 and s.support.max == 2.0
    assert list(s.extremes.row_min) == [-1.0, -3.0]


def test_folding_does_not_depend_on_chunking():
    case = case_by_id("vit-pos-embed")
    law = _law(case, torch.bfloat16)
    exact = resolve("exact")
    one = run_engine(exact, case, torch.bfloat16, "cpu", law, 40 * case.numel, 7,
                     chunk_elements=1 << 30)
    many = run_engine(exact, case, torch.bfloat16, "cpu", law, 40 * case.numel, 7,
                      chunk_elements=3 * case.numel)
    assert np.array_equal(one.binned.hist, many.binned.hist)
    assert one.independence.n_duplicate_rows == many.independence.n_duplicate_rows
    assert one.independence.n_equal_successive == many.independence.n_equal_successive
    # Not random (one draw, folded twice): float64 sums of the same terms in other chunks differ
    # by ~1e-16 relative, on any machine's summation order.
    np.testing.assert_allclose(one.moments.power_sums, many.moments.power_sums, rtol=1e-12)
    assert one.independence.successive.count == many.independence.successive.count == 39 * case.numel
    # Per-chunk sums are float32 cascade sums: chunking moves them by ~1e-7 of the sum of |terms|
    # (here ~count), six orders of magnitude below the statistic's standard error sqrt(count).
    # A rounding-error bound, 10x the worst case of any SIMD width's order: not a random event.
    count = one.independence.successive.count
    assert abs(one.independence.successive.sum_uv - many.independence.successive.sum_uv) < 1e-6 * count


def test_budget_stops_are_round_call_counts():
    assert [k for k in range(1, 50) if is_budget_stop(k)] == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48]
    assert is_budget_stop(3 << 20) and not is_budget_stop(5 << 20) and not is_budget_stop(0)


class VirtualClock:
    """Stands in for the `time` module of harness.engine.draw: its perf_counter moves only when
    a test's candidate says so, so the candidate time a budget sees does not depend on the load
    of the machine (a wall clock on a busy 2-core runner can stop a draw at any call count)."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.mark.parametrize("chunk_calls", [3, 100])
def test_a_budget_limited_draw_is_reproduced_by_its_n(chunk_calls, monkeypatch):
    """The budget stops on a round call count; drawing that n without a budget folds the same
    chunks in the same order: the Summaries are equal bit for bit (what `--samples` relies on)."""
    from harness.engine import draw

    case = case_by_id("vit-pos-embed")
    law = _law(case, torch.float32)
    exact = resolve("exact")
    clock = VirtualClock()
    monkeypatch.setattr(draw, "time", clock)

    def slow(t, mean, std, a, b, generator):
        clock.now += 0.015  # 15 ms of candidate time per call, on the engine's clock
        return exact(t, mean, std, a, b, generator)

    kw = dict(chunk_elements=chunk_calls * case.numel, min_calls=2)
    cut = run_engine(slow, case, torch.float32, "cpu", law, 1000 * case.numel, 11,
                     time_budget=0.1, **kw)
    calls = cut.n // case.numel
    # Deterministic (virtual clock): the budget is spent after 7 calls (0.105 s); the next stop
    # on the grid is 8, which is not a whole number of chunks of 3 (3 + 3 + 2).
    assert cut.notes.get("stopped_by_budget") and is_budget_stop(calls) and calls == 8
    again = run_engine(exact, case, torch.float32, "cpu", law, cut.n, 11, **kw)
    assert again.n == cut.n and not again.notes.get("stopped_by_budget")
    assert np.array_equal(cut.binned.hist, again.binned.hist)
    assert np.array_equal(cut.moments.power_sums, again.moments.power_sums)
    assert cut.independence.successive == again.independence.successive and cut.independence.lag1 == again.independence.lag1
    assert np.array_equal(cut.extremes.row_min, again.extremes.row_min) and np.array_equal(cut.extremes.row_max, again.extremes.row_max)
    assert cut.independence.n_duplicate_rows == again.independence.n_duplicate_rows


def test_no_budget_stop_before_min_calls_or_beyond_n():
    case = case_by_id("normal-2sigma")
    law = _law(case, torch.float32)
    s = run_engine(resolve("exact"), case, torch.float32, "cpu", law, 8 * case.numel, 1,
                   time_budget=1e-9, min_calls=3)
    assert s.n == 3 * case.numel and s.notes["stopped_by_budget"]
    s = run_engine(resolve("exact"), case, torch.float32, "cpu", law, 2 * case.numel, 1,
                   time_budget=1e-9, min_calls=2)
    assert s.n == 2 * case.numel and not s.notes.get("stopped_by_budget")  # n reached: not cut


def test_normal_throughput_is_measured_once_per_tensor_kind():
    rate = normal_throughput((64, 64), torch.float32, "cpu")
    assert rate > 0 and normal_throughput((64, 64), torch.float32, "cpu") == rate
    if hasattr(torch, "float8_e4m3fn"):  # normal_ does not support it: no yardstick
        assert math.isnan(normal_throughput((8, 8), torch.float8_e4m3fn, "cpu"))


def test_memory_does_not_grow_with_n():
    case = Case("short-rows", 0.0, 1.0, -2.0, 2.0, (4096, 4))
    law = _law(case, torch.float32)
    s = run_engine(resolve("exact"), case, torch.float32, "cpu", law, 1 << 21, 3,
                   chunk_elements=1 << 18)
    assert s.binned.hist.size == 1 << 20
    assert len(s.extremes.row_min) == ROW_EXTREMES_CAP < s.extremes.n_rows_total


def test_a_chunk_of_many_tiny_calls_holds_a_bounded_number_of_row_views():
    """A chunk of 2^16 one-element calls: the row a call is copied into is a view made for that
    call and dropped, so the draw does not hold one tensor per call of the chunk (~1.4 KB each
    with their C++ part: a GB at a chunk of 2^20 calls). What Python allocated and still holds
    at the last call (tracemalloc: ~0.35 MB; one view per call kept: ~5.5 MB)."""
    import tracemalloc

    calls = 1 << 16
    held = []

    def counting(t, mean, std, a, b, generator):
        t.normal_(generator=generator).clamp_(a, b)
        counting.calls += 1
        if counting.calls == calls:
            held.append(tracemalloc.get_traced_memory()[0])
        return t

    case = Case("one", 0.0, 1.0, -2.0, 2.0, (1,))
    law = _law(case, torch.float32)
    counting.calls = 0
    engine.run_engine(counting, case, torch.float32, "cpu", law, 64, 3, families=())  # warm
    counting.calls = 0
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        s = engine.run_engine(counting, case, torch.float32, "cpu", law, calls, 3, families=(),
                              call_timeout=30.0)
    finally:
        tracemalloc.stop()
    assert s.n == calls and s.n_calls == calls
    assert held[0] - start < 2 << 20


def test_deadline_interrupts_a_pure_python_loop():
    def forever(t, *args):
        while True:
            pass

    case = case_by_id("normal-2sigma")
    t0 = time.perf_counter()
    with pytest.raises(CandidateFailure) as info:
        run_engine(forever, case, torch.float32, "cpu", _law(case, torch.float32), 1000, 1,
                   call_timeout=0.5)
    # about a hang only: ~0.5 s expected; without the deadline the loop never returns
    assert info.value.kind == "hang" and time.perf_counter() - t0 < 60


def test_a_candidate_that_takes_the_alarm_is_still_held_to_its_deadline():
    """A call that sets SIGALRM's handler (to ignore it, as a library owning the alarm might)
    left the deadline deaf: a later call that hung hung the run. Each call takes it back."""
    import signal

    def takes_the_alarm(t, mean, std, a, b, generator):
        takes_the_alarm.calls += 1
        if takes_the_alarm.calls == 1:
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
        if takes_the_alarm.calls == 3:
            time.sleep(120)
        return t.normal_(generator=generator).clamp_(a, b)

    takes_the_alarm.calls = 0
    before = signal.getsignal(signal.SIGALRM)
    case = Case("c", 0.0, 1.0, -2.0, 2.0, (64,))
    t0 = time.monotonic()
    with pytest.raises(CandidateFailure) as failure:
        engine.run_engine(takes_the_alarm, case, torch.float32, "cpu",
                          _law(case, torch.float32), 64 * 8, 3, families=(), call_timeout=0.5)
    assert failure.value.kind == "hang" and "call 3 did not return" in str(failure.value)
    assert time.monotonic() - t0 < 60  # about the deadline: ~seconds, not the call's 120 s
    assert signal.getsignal(signal.SIGALRM) is before  # the draw puts back what it found


def test_a_ctrl_c_stops_a_draw_whose_candidate_took_sigint():
    """A call that ignores SIGINT (as a library that handles Ctrl-C its own way might) made a
    user's Ctrl-C during the draw's later calls do nothing. Each call takes it back: the Ctrl-C
    of call 3 (sent here by the call itself) stops the draw as the user's."""
    import os
    import signal

    def takes_sigint(t, mean, std, a, b, generator):
        takes_sigint.calls += 1
        if takes_sigint.calls == 1:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if takes_sigint.calls == 3:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)  # the handler runs at the next bytecode
        return t.normal_(generator=generator).clamp_(a, b)

    takes_sigint.calls = 0
    # The draw takes SIGINT where it finds Python's own handler (a pytest run's process); an
    # xdist worker, or an earlier test, may hold another: set it for the test, put it back after.
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        case = Case("c", 0.0, 1.0, -2.0, 2.0, (64,))
        with pytest.raises(KeyboardInterrupt):
            engine.run_engine(takes_sigint, case, torch.float32, "cpu",
                              _law(case, torch.float32), 64 * 8, 3, families=(),
                              call_timeout=30.0)
        assert takes_sigint.calls == 3
        # the draw puts back what it found
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)


def test_a_raising_candidate_is_reported_not_propagated():
    def broken(t, *args):
        raise RuntimeError("boom")

    case = case_by_id("normal-2sigma")
    with pytest.raises(CandidateFailure, match="RuntimeError: boom"):
        run_engine(broken, case, torch.float32, "cpu", _law(case, torch.float32), 1000, 1)


def _exact_then(change):
    """The exact sampler, then `change(tensor)` from its third call on."""
    exact, calls = resolve("exact"), []

    def sampler(t, mean, std, a, b, generator=None):
        exact(t, mean, std, a, b, generator)
        calls.append(1)
        if len(calls) >= 3:
            with torch.no_grad():
                change(t)
        return t

    return sampler


@pytest.mark.parametrize("change, says", [
    (lambda t: t.resize_(3), "shape (256, 256) -> (3,); strides (256, 1) -> (1,)"),
    (lambda t: t.set_(torch.zeros_like(t)), "storage"),
    (lambda t: setattr(t, "data", torch.zeros(t.shape, dtype=torch.float64)),
     "storage; dtype torch.float32 -> torch.float64"),
    (lambda t: t.requires_grad_(True), "requires_grad False -> True"),
])
def test_a_candidate_that_breaks_its_tensor_ends_the_draw_naming_what_changed(change, says):
    """What the harness poisons and reads after a call is the tensor it gave: a call that
    resizes it, swaps its storage or turns on its autograd ends the draw as the candidate's
    failure (fail rows), where the next poisoning or copy raised a harness error before."""
    case = case_by_id("normal-2sigma")
    with pytest.raises(CandidateFailure) as info:
        run_engine(_exact_then(change), case, torch.float32, "cpu", _law(case, torch.float32),
                   10 * 65536, 1)
    assert info.value.kind == "broke its tensor"
    assert f"call 3 changed the tensor it was given ({says})" in str(info.value), str(info.value)
    assert info.value.summary is not None


def test_deadline_without_limit_is_a_no_op():
    with call_deadline(None):
        pass
    with call_deadline(0):
        pass


def test_sums_do_not_depend_on_the_thread_count():
    case = case_by_id("normal-2sigma")
    law = _law(case, torch.float32)
    g = torch.Generator().manual_seed(5)
    x = torch.randn((16, *case.shape), generator=g).clamp_(-2, 2)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = summarize_samples(x, law)
        torch.set_num_threads(max(2, threads))
        many = summarize_samples(x, law)
    finally:
        torch.set_num_threads(threads)
    # Deterministic by design (harness.engine.fixed_sum: blocks of 4096 reduced one per thread,
    # in a fixed order): bit-equal for any thread count; the SIMD width, the same for both folds,
    # changes the last bits of both alike.
    assert np.array_equal(one.moments.power_sums, many.moments.power_sums)
    assert one.independence.lag1 == many.independence.lag1 and one.independence.successive == many.independence.successive


# ------------------------------------------------------------------ mass bins

MASS_CASES = [case_by_id("normal-2sigma"), case_by_id("tail-5"), case_by_id("large-mean"),
              case_by_id("narrow-window-8"), case_by_id("tiny-std")]


def _keys_of(x: torch.Tensor, fmt) -> np.ndarray:
    bits = dtype_bits(x.dtype)
    patterns = x.reshape(-1).view(INT_VIEW[bits]).numpy().astype(np.int64)
    unsigned = patterns & ((1 << bits) - 1) if bits < 64 else patterns
    return fmt.keys_from_bits(unsigned.astype(np.uint64))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("case", MASS_CASES, ids=lambda c: c.id)
def test_mass_bins_fold_equals_a_direct_count(case, dtype):
    """Samples of the law, its support ends and their neighbours, random bit patterns (NaN, inf,
    poison): the engine's mass-bin counts equal a direct numpy count of each key's mass bin
    (`MassBins.bin_of_keys`), every key lies in its bin's key range, and the watched bins' exact
    tallies equal a direct count."""
    law = _law(case, dtype)
    mb = law.mass_bins
    fmt, bits = law.fmt, dtype_bits(dtype)
    g = torch.Generator().manual_seed(8)
    inside = torch.empty(30_000, dtype=dtype)
    resolve("exact")(inside, case.mean, case.std, case.a, case.b, g)
    edges = torch.tensor(np.r_[fmt.next_down(law.support_lo), law.support_lo, law.support_hi,
                               fmt.next_up(law.support_hi), 0.0, -0.0, np.inf, -np.inf], dtype=dtype)
    raw = torch.randint(-2**62, 2**62, (5000,), generator=g, dtype=torch.int64)
    noise = (raw.to(INT_VIEW[bits]) if bits < 64 else raw).view(dtype)
    x = torch.cat([inside, edges, noise, poison_(torch.empty(5, dtype=dtype))])
    keys = _keys_of(x, fmt)
    j = mb.bin_of_keys(keys)
    watch = tuple(int(v) for v in np.unique(j[:3]))
    s = summarize_samples(x.reshape(1, -1), law, watch=watch)
    assert np.array_equal(s.localized.mass_hist, np.bincount(j, minlength=mb.n_bins))
    lo, hi = mb.key_ranges(j)
    assert np.all((lo <= keys) & (keys <= hi))
    sel = np.isin(j, watch)
    uk, uc = np.unique(keys[sel], return_counts=True)
    assert s.localized.watch_bins == watch
    assert np.array_equal(s.localized.watch_keys, uk) and np.array_equal(s.localized.watch_counts, uc)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("case", MASS_CASES, ids=lambda c: c.id)
def test_mass_bins_partition_the_keys_with_exact_masses(case, dtype):
    """Contiguous key ranges covering every pattern in order; masses >= 0 summing to 1; a split
    main bin's parts sum to its mass; no bin heavier than 2 MASS_BIN_MASS unless it is one value
    or its coarse bin could not be split further (the density is not flat inside it)."""
    from reference.mass_bins import MASS_BIN_MASS, MASS_BIN_MAX_SPLIT

    law = _law(case, dtype)
    mb = law.mass_bins
    j = np.arange(mb.n_bins)
    lo, hi = mb.key_ranges(j)
    assert lo[0] == 0 and hi[-1] == np.uint64((1 << dtype_bits(dtype)) - 1)
    assert np.all(lo[1:] == hi[:-1] + np.uint64(1)) and np.all(lo <= hi)
    assert np.all(mb.probs >= 0) and mb.probs.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.array_equal(mb.bin_of_keys(lo), j) and np.array_equal(mb.bin_of_keys(hi), j)
    if mb.fine is None:
        m = law.hist_bin_probs()
        k = (lo >> np.uint64(mb.low_bits)).astype(np.int64)
        split = mb.split[k]
        sums = np.bincount(k[split], weights=mb.probs[split], minlength=m.size)
        heavy = np.flatnonzero(mb.split)
        np.testing.assert_allclose(sums[heavy], m[heavy], rtol=1e-11)
    keys = mb.n_keys(j)
    c = np.searchsorted(mb.start, j, side="right") - 1
    capped = mb.split[c] & ((mb.low_bits - mb.shift[c]) == min(mb.low_bits, MASS_BIN_MAX_SPLIT))
    heavy = mb.probs > 2 * MASS_BIN_MASS
    assert not np.any(heavy & (keys > 1) & ~capped)


def test_mass_bins_do_not_depend_on_chunking_or_raw_order():
    """Chunked folding (several calls per chunk, chunks of uneven size) gives the same mass-bin
    counts and watched tallies as one fold; negative values (whose raw low bits run backwards)
    land in the same ordered bins as their keys say."""
    case = case_by_id("normal-2sigma")
    law = _law(case, torch.float32)
    exact = resolve("exact")
    probe = run_engine(exact, case, torch.float32, "cpu", law, 6 * case.numel, 3,
                       chunk_elements=1 << 30)
    # the three most-hit bins, ties broken by index (a stable order: argsort's tie order differs
    # between numpy's SIMD sorts); they hold at least one sample each by construction
    order = np.lexsort((np.arange(probe.localized.mass_hist.size), -probe.localized.mass_hist))
    watch = tuple(sorted(int(j) for j in order[:3]))
    assert probe.localized.mass_hist[list(watch)].min() >= 1
    one = run_engine(exact, case, torch.float32, "cpu", law, 6 * case.numel, 3,
                     chunk_elements=1 << 30, watch=watch)
    many = run_engine(exact, case, torch.float32, "cpu", law, 6 * case.numel, 3,
                      chunk_elements=4 * case.numel, watch=watch)
    assert np.array_equal(one.localized.mass_hist, many.localized.mass_hist) and np.array_equal(one.localized.mass_hist, probe.localized.mass_hist)
    assert np.array_equal(one.localized.watch_keys, many.localized.watch_keys)
    assert np.array_equal(one.localized.watch_counts, many.localized.watch_counts)
    assert one.localized.watch_counts.sum() == one.localized.mass_hist[list(watch)].sum() >= 3
    assert one.localized.mass_hist.sum() == one.n


def test_sixteen_bit_summaries_have_no_mass_bins():
    law = _law(case_by_id("normal-2sigma"), torch.bfloat16)
    assert law.mass_bins is None
    s = summarize_samples(torch.zeros(1, 8, dtype=torch.bfloat16), law, watch=(1, 2))
    assert not s.has("localized")


@pytest.mark.parametrize("view", VIEWS)
def test_the_other_elements_of_the_base_are_exactly_those_the_target_is_not(view):
    """What the draw checks for writes outside the view is the complement of the target in its
    base, element for element, for every layout `make_target` makes."""
    case = types.SimpleNamespace(shape=(2, 3, 4, 5) if view == "channels_last" else (6, 5),
                                 view=view)
    target, base, others = make_target(case, torch.float32, "cpu")
    index = torch.arange(base.numel(), dtype=torch.float32).reshape(base.shape)
    base.copy_(index)
    inside = {int(v) for v in target.flatten().tolist()}
    outside = [int(v) for part in others for v in part.flatten().tolist()]
    assert len(outside) == len(set(outside))
    assert set(outside) == set(range(base.numel())) - inside


@pytest.mark.parametrize("view,outside_per_call", [("stepped", 12), ("column-block", 36),
                                                   ("transposed", 0)])
def test_a_candidate_writing_its_whole_storage_is_counted_outside_the_view(view, outside_per_call):
    """A sampler that fills the storage behind its view: every element of the base that is not
    the view is counted, on every call."""
    exact = resolve("exact")

    def spills(t, mean, std, a, b, generator):
        storage = t.untyped_storage().nbytes() // t.element_size()
        torch.as_strided(t, (storage,), (1,), 0).fill_(0.0)  # every element behind the view
        return exact(t, mean, std, a, b, generator)

    case = Case("spill", 0.0, 1.0, -2.0, 2.0, (3, 4), view=view)
    s = run_engine(spills, case, torch.float32, "cpu", _law(case, torch.float32), 5 * 12, 3)
    assert s.n_calls == 5 and s.n_written_outside == 5 * outside_per_call
