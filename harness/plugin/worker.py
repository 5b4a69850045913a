"""The plugin object of an xdist worker: its share of the machine, and its crash log.

`WorkerPlugin` pins the worker to the CUDA device the controller gave it
(`controller.ControllerPlugin.pytest_configure_node`) before any CUDA work, keeps torch to the
worker's share of the cores, has a fatal signal's Python stack written where the controller reads
it (`crashes`), and stops the rank processes the worker started for sharded groups. The rows its
tests make ride on their reports to the controller, which records them.
"""

from __future__ import annotations

import os

import pytest
import torch

from ..session.run_plan import HarnessSession
from ..sharded import ranks
from . import crashes


class WorkerPlugin:
    """The hooks of an xdist worker (see the module); `workerinput`: what xdist gave it."""

    def __init__(self, session: HarnessSession, workerinput: dict):
        self.session = session
        self.workerinput = workerinput

    @property
    def workers(self) -> int:
        """The xdist workers of the run, this one included."""
        return int(self.workerinput.get("workercount", 1))

    def start(self) -> None:
        """At pytest_configure: the worker's CUDA device and its share of the cores."""
        if self.workerinput.get("harness_cuda_device") is not None:
            # Pin the worker to the CUDA device the controller gave it (worker index modulo
            # device count, see harness.fleet.scheduling) before any CUDA work, so default
            # allocations and kernels of different workers go to different devices.
            torch.cuda.set_device(int(self.workerinput["harness_cuda_device"]))
        # One worker must not oversubscribe the cores the others use.
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // self.workers))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session):
        # After every pytest_configure (pytest's own faulthandler plugin enables it on stderr
        # there): a fatal signal's stack goes to the log the controller reads.
        crashes.record_fatal_errors(self.session.report.report_dir,
                                    os.environ.get("PYTEST_XDIST_WORKER", "main"))

    def pytest_sessionfinish(self, session, exitstatus):
        ranks.close_pools()  # the rank processes this worker started for sharded groups
