"""A plain and a sharded group ask for their draws by the same rules (`CaseRunner.draw_request`:
the size-scaled call timeout among them), and both caches key, keep and evict runners the same
way (`RunnerCache.get`), the sharded one building its own kind only. Nothing is drawn here."""

from __future__ import annotations

import dataclasses

import torch

from candidates import resolve
from harness.cases import case_by_id
from harness.runner import CaseRunner, RunConfig, RunnerCache
from harness.sharded.layout import Layout
from harness.sharded.dtensor_runner import ShardedCaseRunner, ShardedRunnerCache


def test_a_sharded_group_asks_for_its_draw_as_a_plain_one_does():
    big = dataclasses.replace(case_by_id("normal-2sigma"), shape=(4096, 4096))  # 2^24 elements
    config = RunConfig(profile="smoke", case_timeout=5.0)
    plain = CaseRunner(resolve("exact"), big, torch.float32, "cpu", config)
    sharded = ShardedCaseRunner(resolve("exact"), big, torch.float32, "cpu", config,
                                Layout(2, "shard0"))
    assert plain.draw_request(1) == sharded.draw_request(1)
    # the floor, or 30 x what normal_ takes to fill the 2^24 elements on this machine
    timeout = sharded.draw_request(1).call_timeout
    assert timeout == config.call_timeout(big, torch.float32, "cpu") and timeout >= 5.0


def test_both_caches_keep_one_runner_per_group_and_evict_the_oldest():
    exact, config = resolve("exact"), RunConfig(profile="smoke")
    cases = [case_by_id(c) for c in ("normal-2sigma", "tail-5", "half-normal")]
    plain = RunnerCache(size=2)
    first = plain.get(exact, cases[0], torch.float32, "cpu", config)
    assert type(first) is CaseRunner
    assert plain.get(exact, cases[0], torch.float32, "cpu", config) is first
    for case in cases[1:]:
        plain.get(exact, case, torch.float32, "cpu", config)
    assert plain.get(exact, cases[0], torch.float32, "cpu", config) is not first  # evicted

    sharded = ShardedRunnerCache(size=2)
    a = sharded.get(exact, cases[0], torch.float32, "cpu", config, Layout(2, "shard0"))
    b = sharded.get(exact, cases[0], torch.float32, "cpu", config, Layout(2, "shard1"))
    assert isinstance(a, ShardedCaseRunner) and a is not b and a.layout == Layout(2, "shard0")
    assert sharded.get(exact, cases[0], torch.float32, "cpu", config, Layout(2, "shard0")) is a
