"""The harness side of `library_server.py`: a persistent child process per library KIND.

`server(kind)` is this process's `LibraryServer` for a KIND (``keras-torch``, ``keras-jax``,
``keras-numpy``, ``paddle``): the child is started on the first draw (importing the library costs
seconds, counted as candidate time of that call), serves every later draw, and is killed at exit,
or when a call fails in the middle of an exchange — a timeout (the engine's SIGALRM), a broken pipe,
a dead child — so the next call starts a fresh one. Only call parameters and the raw bytes of the
library's result cross the pipe: the bits are the library's.

A library that raises in the child comes back as `LibraryError` naming the original exception type;
a child that dies comes back as `LibraryError` with its exit code and the last line it printed.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from candidates.libraries import library_server as wire
from candidates.libraries.common import LibraryError

__all__ = ["LibraryServer", "server"]

SERVER_FILE = Path(__file__).with_name("library_server.py")

# The child runs the server file with its folder *off* sys.path: that folder holds modules named
# jax.py, keras.py, paddle.py, which would shadow the libraries.
_BOOT = ("import runpy, sys; sys.path.pop(0); sys.argv = sys.argv[1:]; "
         "runpy.run_path(sys.argv[0], run_name='__main__')")


class LibraryServer:
    """One child process serving one KIND of draws (see the module docstring)."""

    def __init__(self, kind: str):
        self.kind = kind
        self.proc: subprocess.Popen | None = None
        self.read_fd: int | None = None
        self.write_fd: int | None = None
        self.log = None
        self.versions: dict = {}

    def _start(self) -> None:
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        threads = str(torch.get_num_threads())
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="", HARNESS_LIBRARY_THREADS=threads,
                   OMP_NUM_THREADS=threads, TF_CPP_MIN_LOG_LEVEL="3")
        self.log = tempfile.TemporaryFile(prefix=f"harness-{self.kind}-")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(SERVER_FILE), self.kind, str(to_child_r),
             str(from_child_w)],
            pass_fds=(to_child_r, from_child_w), env=env, cwd=tempfile.gettempdir(),
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        os.close(to_child_r)
        os.close(from_child_w)
        self.write_fd, self.read_fd = to_child_w, from_child_r
        reply = self._receive()
        if reply[0] != "ready":
            raise LibraryError(f"{self.kind} child sent {reply[0]!r} instead of ready")
        self.versions = dict(reply[1])

    def _receive(self):
        try:
            return wire.receive(self.read_fd)
        except EOFError:
            code = self.proc.wait(timeout=5) if self.proc is not None else None
            raise LibraryError(f"{self.kind} child process exited (code {code}): "
                               f"{self._last_log_line()}") from None

    def _last_log_line(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        lines = [ln.strip() for ln in self.log.read().decode(errors="replace").splitlines()
                 if ln.strip()]
        return lines[-1][:300] if lines else "no output"

    def ensure_started(self) -> None:
        """Start the child if it is not running (the candidate's ``prepare``; `draw` does it too)."""
        if self.proc is None or self.proc.poll() is not None:
            try:
                self.close()
                self._start()
            except BaseException:
                self.close()
                raise

    def draw(self, request: dict, what: str) -> np.ndarray:
        """Send one call's parameters; the library's result as a numpy array of its own dtype
        (bfloat16 as uint16 bit patterns). ``what`` names the sampler in error messages."""
        try:
            if self.proc is None or self.proc.poll() is not None:
                self.close()
                self._start()
            wire.send(self.write_fd, request)
            reply = self._receive()
        except BaseException:
            # A timeout or a broken pipe leaves the exchange half done: this child goes, the
            # next call starts a fresh one.
            self.close()
            raise
        if reply[0] == "error":
            raise LibraryError(f"{what} raised {reply[1]}: {reply[2]}")
        _, dtype_name, shape, raw = reply
        # numpy has no bfloat16 of its own: its bit patterns travel as uint16 (the child names them
        # bfloat16 only when bfloat16 was asked for; to_torch takes uint16 for bfloat16).
        storage = {"bfloat16": np.uint16}.get(dtype_name, dtype_name)
        try:
            return np.frombuffer(raw, dtype=storage).reshape(shape)
        except (TypeError, ValueError) as exc:
            raise LibraryError(f"{what} returned an unreadable {dtype_name} array: {exc}") from None

    def close(self) -> None:
        for fd in (self.read_fd, self.write_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.read_fd = self.write_fd = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None


_SERVERS: dict[str, LibraryServer] = {}


def server(kind: str) -> LibraryServer:
    """This process's server for ``kind`` (created on first use, killed at exit)."""
    if kind not in _SERVERS:
        _SERVERS[kind] = LibraryServer(kind)
    return _SERVERS[kind]


@atexit.register
def _close_servers() -> None:
    for s in _SERVERS.values():
        s.close()
