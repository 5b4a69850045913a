"""A warm ``python -m MODULE ARGS...``: the docs tests' subprocess for checking command lines.

Started once per test process (xdist worker) from the repository root, it reads one request per
line on stdin, ``{"module": "pytest", "args": ["suites", "--candidate", "exact", ...]}``, runs the
module as ``python -m`` would (`runpy`, ``sys.argv`` set, ``SystemExit`` caught), and answers one
line, ``{"rc": 0, "output": "...the last lines it printed..."}``. Importing torch and the harness
once, instead of once per line, is what makes a ``pytest suites ... --collect-only`` cost a second
instead of six (see docblocks.py).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import sys
import traceback

OUTPUT_TAIL = 4000


def run(module: str, args: list[str]) -> tuple[int, str]:
    buf = io.StringIO()
    saved_argv = sys.argv[:]
    sys.argv = [module, *args]
    rc = 0
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
        rc = 0 if code is None else int(code) if isinstance(code, int) else 1
        if not isinstance(code, (int, type(None))):
            buf.write(f"{code}\n")
    except BaseException:  # noqa: BLE001 - any failure is the answer
        rc = 1
        buf.write(traceback.format_exc())
    finally:
        sys.argv = saved_argv
    return rc, buf.getvalue()[-OUTPUT_TAIL:]


def main() -> None:
    # Own copies of stdin/stdout: pytest's fd-level capture redirects fds 0-2 while it runs.
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    sys.path.insert(0, os.getcwd())  # as `python -m` does
    for line in requests:
        req = json.loads(line)
        rc, output = run(req["module"], req["args"])
        answers.write(json.dumps({"rc": rc, "output": output}) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
