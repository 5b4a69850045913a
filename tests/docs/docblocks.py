"""Tested docs: every fenced code block of README.md and docs/**/*.md is a test item (sybil).

What each block's item does, by the block's language:

* ``python``: executed (sybil's `PythonCodeBlockParser`); the blocks of one document share one
  namespace, in document order, and run with the repository root as the working directory.
* ``bash``: every command line (``\\`` continuations joined, comments dropped, ``&&``/``||``/``;``/
  ``|`` split) is checked without running it: ``pytest suites ARGS`` is collected, as
  ``python -m pytest suites ARGS --collect-only -q -p no:cacheprovider --report-dir ''`` from the
  repository root with ``-n``/``--dist``/``--junitxml`` removed, and must exit 0, which proves
  that every option, case, dtype and candidate the line names exists and validates (it runs in
  `warm_python.py`, one subprocess per test process that imports torch and the harness once);
  ``pytest tests/...``: the paths exist; ``python -m reports SUB``: ``SUB --help`` exits 0;
  ``pip install -r/-c FILE``, ``kubectl apply -f FILE``, ``python FILE.py``: the files exist;
  ``tox -e ENV``: tox.ini defines ENV; anything else (cd, echo, git, kubectl wait, ...) is
  collected and not run.
* ``yaml``: must parse (``yaml.safe_load_all``).
* anything else (``text``, ``markdown``, ``ini``, no language): collected, nothing to run.

Directives, an HTML comment on the lines just before a block (invisible on GitHub and in the
site):

* ``<!-- skip: next "reason" -->`` (sybil's skip syntax): the item is skipped with the reason; for
  a python block that is a full run (minutes).
* ``<!-- docs: run -->`` / ``<!-- docs: run exit=1 -->``: a bash block that takes seconds is run
  for real (``bash -e``, from the repository root) and must exit with that status (default 0).
* ``<!-- docs: not-run (reason) -->``: a bash block that cannot be checked (a placeholder such as
  ``mypkg...``, or a directory an earlier run leaves): skipped with the reason. Keep them few.

The directives are read when the document is parsed, not through sybil's stateful skip evaluator,
and a python block first replays the python blocks before it that this process has not run: the
harness's xdist scheduler (``harness/fleet/scheduling.py``) sends tests without a parametrization
id to any worker, so the items of one document can land on different workers.

The collection hook is in conftest.py.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from unittest import SkipTest

import pytest

from sybil import Region, Sybil
from sybil.parsers.markdown import PythonCodeBlockParser
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[2]
# Path.match has no recursive "**" before Python 3.13: one pattern per depth.
DOC_PATTERNS = ("README.md", "docs/*.md", "docs/**/*.md", "docs/**/**/*.md")

BASH_LANGUAGES = {"bash", "sh", "shell", "console"}
COLLECT_TIMEOUT_S = 180
RUN_TIMEOUT_S = 300


def documents() -> list[Path]:
    """README.md and every page under docs/, sorted (the order is the node order)."""
    docs = sorted((ROOT / "docs").rglob("*.md"))
    return [ROOT / "README.md", *docs]


# ------------------------------------------------------------------------------------------------
# Directives


DIRECTIVE = re.compile(r"<!--\s*(?P<body>.*?)\s*-->\s*$", re.DOTALL)


@dataclass(frozen=True)
class Directive:
    """What the comment just before a block asks for."""

    skip: str | None = None        # skip: next "reason"  /  docs: not-run (reason)
    run: bool = False              # docs: run
    exit: int = 0                  # docs: run exit=N


def parse_directive(body: str) -> Directive:
    """One directive comment's body (``skip: next "r"``, ``docs: run exit=1``, ...)."""
    m = re.fullmatch(r"skip:\s*next(?:\s+(?P<reason>.+))?", body, re.DOTALL)
    if m:
        reason = (m.group("reason") or "").strip().strip("\"'")
        return Directive(skip=reason or "skipped (skip: next)")
    m = re.fullmatch(r"docs:\s*not-run\s*\((?P<reason>[^)]+)\)", body)
    if m:
        return Directive(skip=f"not run: {m.group('reason').strip()}")
    m = re.fullmatch(r"docs:\s*run(?:\s+exit=(?P<exit>\d+))?", body)
    if m:
        return Directive(run=True, exit=int(m.group("exit") or 0))
    raise ValueError(f"unknown docs directive <!-- {body} -->; known: skip: next \"reason\", "
                     f"docs: run [exit=N], docs: not-run (reason)")


def directive_before(text: str, start: int) -> Directive:
    """The directive in the HTML comment that ends on the last non-blank line before `start`
    (a code fence), or none. Comments that are not directives (``<!-- prose -->``) are ignored."""
    before = text[:start].rstrip()
    if not before.endswith("-->"):
        return Directive()
    opening = before.rfind("<!--")
    if opening < 0:
        return Directive()
    body = before[opening + 4:-3].strip()
    if not re.match(r"(skip|docs)\s*:", body):
        return Directive()
    return parse_directive(body)


def skip(reason: str):
    """Skip the current item, reported at the block's own line (``README.md:37: reason``)."""
    try:
        raise pytest.skip.Exception(reason, _use_item_location=True)
    except TypeError:  # a pytest without that keyword: the reason alone
        raise SkipTest(reason) from None


# ------------------------------------------------------------------------------------------------
# Blocks


@dataclass
class Block:
    """A fenced block: its language, its source, and the directive before it."""

    language: str
    source: str
    directive: Directive
    line: int

    def skip_if_asked(self) -> None:
        if self.directive.skip:
            skip(self.directive.skip)


class FencedBlockParser:
    """Every fenced code block but python's (sybil's own parser takes those): one region each."""

    def __init__(self) -> None:
        self.lexer = RawFencedCodeBlockLexer(
            info_pattern=re.compile(r"(?P<info>[^\n]*)$\n", re.MULTILINE),
            mapping={"info": "info", "source": "source"})

    def __call__(self, document):
        for region in self.lexer(document):
            info = region.lexemes["info"].strip()
            language = info.split()[0].lower() if info else ""
            if language in ("python", "py"):
                continue
            line = document.text.count("\n", 0, region.start) + 1
            block = Block(language, str(region.lexemes["source"]),
                          directive_before(document.text, region.start), line)
            yield Region(region.start, region.end, block, evaluate_block)


def evaluate_block(example) -> None:
    block: Block = example.parsed
    block.skip_if_asked()
    if block.language in BASH_LANGUAGES:
        if block.directive.run:
            run_bash(block)
        else:
            for command in bash_commands(block.source):
                check_command(command)
    elif block.language in ("yaml", "yml"):
        import yaml

        list(yaml.safe_load_all(block.source))
    # text, markdown, ini, ...: collected, nothing to run


class PythonBlocks(PythonCodeBlockParser):
    """Sybil's python parser; each region's evaluator honours the directive before the block and
    replays the document's earlier python blocks this process has not run (see the docstring)."""

    def __call__(self, document):
        for region in super().__call__(document):
            region.evaluator = PythonBlock(region.evaluator,
                                           directive_before(document.text, region.start))
            yield region


class PythonBlock:
    def __init__(self, inner, directive: Directive) -> None:
        self.inner = inner
        self.directive = directive

    def __call__(self, example) -> None:
        __tracebackhide__ = True
        if self.directive.skip:
            skip(self.directive.skip)
        done = example.namespace.setdefault("__docs_done__", set())
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            for earlier in example.document.examples():
                if earlier.start >= example.start:
                    break
                ev = earlier.region.evaluator
                if isinstance(ev, PythonBlock) and not ev.directive.skip \
                        and earlier.start not in done:
                    ev.inner(earlier)
                    done.add(earlier.start)
            self.inner(example)
            done.add(example.start)
        finally:
            os.chdir(cwd)


# ------------------------------------------------------------------------------------------------
# bash


OPERATORS = {"&&", "||", ";", "|", "&", "(", ")"}


def bash_commands(source: str) -> list[list[str]]:
    """The simple commands of a block: continuations joined, comments dropped, split at shell
    operators, leading VAR=value assignments removed."""
    text = re.sub(r"\\\n", " ", source)
    commands = []
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        current: list[str] = []
        for token in lexer:
            if token in OPERATORS:
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(token)
        if current:
            commands.append(current)
    out = []
    for cmd in commands:
        while cmd and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", cmd[0]):
            cmd = cmd[1:]
        if cmd:
            out.append(cmd)
    return out


def _python_module(cmd: list[str]) -> tuple[str | None, list[str]]:
    """(module, its args) for ``python[3] -m MOD ARGS``; (None, cmd) otherwise."""
    if len(cmd) >= 3 and re.fullmatch(r"python(3(\.\d+)?)?", cmd[0]) and cmd[1] == "-m":
        return cmd[2], cmd[3:]
    return None, cmd


def check_command(cmd: list[str]) -> None:
    """Check one simple command as the module docstring says (no command runs for real)."""
    module, args = _python_module(cmd)
    if module == "pytest" or (module is None and cmd[0] == "pytest"):
        args = args if module else cmd[1:]
        if args and args[0] == "suites":
            collect_suites(args[1:])
        else:
            for arg in _positional(args, takes_value=PYTEST_VALUE_OPTIONS):
                assert (ROOT / arg.split("::")[0]).exists(), f"pytest {arg}: no such path"
    elif module == "reports":
        assert args, "python -m reports needs a subcommand"
        python_m("reports", [args[0], "--help"])
    elif module == "mkdocs" or cmd[0] == "mkdocs":
        assert (ROOT / "mkdocs.yml").is_file(), "mkdocs.yml missing"
    elif module == "pip" or cmd[0] in ("pip", "pip3"):
        rest = args if module else cmd[1:]
        for flag, value in zip(rest, rest[1:]):
            if flag in ("-r", "--requirement", "-c", "--constraint"):
                assert (ROOT / value).is_file(), f"pip {flag} {value}: no such file"
    elif cmd[0] == "kubectl" and len(cmd) > 1 and cmd[1] == "apply":
        for flag, value in zip(cmd, cmd[1:]):
            if flag in ("-f", "--filename"):
                assert (ROOT / value).exists(), f"kubectl apply -f {value}: no such file"
    elif cmd[0] == "tox":
        for flag, value in zip(cmd, cmd[1:]):
            if flag == "-e":
                for env in value.split(","):
                    assert env in tox_envs(), f"tox -e {env}: not an environment of tox.ini"
    elif module is None and re.fullmatch(r"python(3(\.\d+)?)?", cmd[0]) and len(cmd) > 1 \
            and cmd[1].endswith(".py"):
        assert (ROOT / cmd[1]).is_file(), f"{cmd[1]}: no such file"
    # cd, echo, git, kubectl wait, tox without -e, source/. ...: collected, not run


PYTEST_VALUE_OPTIONS = {"-n", "-m", "-k", "-p", "--dist", "--junitxml", "--report-dir", "-c",
                        "--maxfail", "--timeout", "--numprocesses"}


def _positional(args: list[str], takes_value: set) -> list[str]:
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in takes_value:
            skip = True
        elif not arg.startswith("-"):
            out.append(arg)
    return out


def tox_envs() -> set[str]:
    text = (ROOT / "tox.ini").read_text(encoding="utf-8")
    envs = set(re.findall(r"^\[testenv:([^\]]+)\]", text, re.MULTILINE))
    m = re.search(r"^envlist\s*=\s*(.+)$", text, re.MULTILINE)
    if m:
        envs |= {e.strip() for e in m.group(1).split(",")}
    return envs


# Options a collection must not carry: xdist (one process is enough to collect), and outputs
# that collect-only would still write.
DROPPED = {"-n": 1, "--numprocesses": 1, "--dist": 1, "--junitxml": 1, "--junit-xml": 1}
_collected: dict[tuple, None] = {}


def collect_suites(args: list[str]) -> None:
    """``python -m pytest suites ARGS --collect-only -q -p no:cacheprovider --report-dir ''``
    from the repository root: exit 0, or the item fails with pytest's output."""
    kept, drop = [], 0
    for arg in args:
        if drop:
            drop -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in DROPPED:
            drop = 0 if "=" in arg else DROPPED[name]
            continue
        if re.fullmatch(r"-n\S+", arg):
            continue
        kept.append(arg)
    key = tuple(kept)
    if key in _collected:  # the same line elsewhere in the docs, already collected here
        return
    python_m("pytest", ["suites", *kept, "--collect-only", "-q", "-p", "no:cacheprovider",
                        "--report-dir", ""], timeout=COLLECT_TIMEOUT_S)
    _collected[key] = None


def _environment() -> dict:
    """The environment of a subprocess: the repository importable, no CI shard variables (a CI's
    would split the collected grid), nothing of the pytest run (and xdist worker) it starts from."""
    from harness.fleet.partition import PARTITION_VARIABLES

    env = {k: v for k, v in os.environ.items()
           if k not in PARTITION_VARIABLES and not k.startswith(("PYTEST_XDIST_", "PYTEST_CURRENT"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _fail(command: str, rc: int, expect: int, output: str) -> None:
    raise AssertionError(f"{command}\nexit {rc}, expected {expect}:\n{output[-3000:]}")


def run_quietly(argv: list[str], timeout: float = COLLECT_TIMEOUT_S, expect: int = 0) -> None:
    proc = subprocess.run(argv, cwd=ROOT, env=_environment(), capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != expect:
        _fail(shlex.join(argv), proc.returncode, expect, proc.stdout + proc.stderr)


class WarmPython:
    """One `warm_python.py` subprocess per test process: ``python -m MODULE ARGS`` without paying
    for Python, torch and the harness at every line (a collection then costs about a second)."""

    SCRIPT = Path(__file__).resolve().parent / "warm_python.py"

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None

    def _start(self) -> subprocess.Popen:
        self.proc = subprocess.Popen([sys.executable, "-u", str(self.SCRIPT)], cwd=ROOT,
                                     env=_environment(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, encoding="utf-8")
        return self.proc

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
            proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - a stuck one is killed
            proc.kill()
            proc.wait()

    def run(self, module: str, args: list[str], timeout: float) -> tuple[int, str]:
        proc = self.proc if self.proc is not None and self.proc.poll() is None else self._start()
        proc.stdin.write(json.dumps({"module": module, "args": args}) + "\n")
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else ""
        if not line:  # stuck past the timeout, or dead: the next line gets a fresh process
            proc.kill()
            proc.wait()
            self.proc = None
            why = f"no answer within {timeout:.0f} s" if not ready else "the process died"
            raise AssertionError(f"python -m {module} {shlex.join(args)}: {why}")
        answer = json.loads(line)
        return answer["rc"], answer["output"]


WARM = WarmPython()
atexit.register(WARM.stop)


def python_m(module: str, args: list[str], timeout: float = COLLECT_TIMEOUT_S,
             expect: int = 0) -> None:
    """``python -m MODULE ARGS`` from the repository root (in the warm process) must exit
    `expect`."""
    rc, output = WARM.run(module, args, timeout)
    if rc != expect:
        _fail(f"python -m {module} {shlex.join(args)}", rc, expect, output)


def run_bash(block: Block) -> None:
    """A ``docs: run`` block, for real: ``bash -e`` from the repository root."""
    run_quietly(["bash", "-e", "-c", block.source], timeout=RUN_TIMEOUT_S,
                expect=block.directive.exit)


SYBIL = Sybil(parsers=[PythonBlocks(), FencedBlockParser()], path=str(ROOT),
              patterns=list(DOC_PATTERNS))
