"""The README's quick start, as CI runs it: the install block and the self-tests' command.

    python3 .ci/quickstart.py install   # the lines of the first bash block under "## Quick start"
    python3 .ci/quickstart.py test      # the `pytest tests ...` line of the block after it

`.ci/run` evaluates the install lines in its own shell (so the virtual environment they create and
activate is the one every later step uses) and runs the test command as written, so the README a
newcomer follows and what CI checks are the same text. Comments are dropped. A README whose quick
start lost either block is an error naming what is missing (exit 2), never an empty command.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Quick start"
FENCE = re.compile(r"^```bash\n(.*?)^```", re.M | re.S)
COMMENT = re.compile(r"(^|\s)#.*$")


def quickstart_blocks(text: str) -> list[list[str]]:
    """The bash blocks of the quick start section, each as its command lines (comments and
    blank lines dropped)."""
    start = text.find(SECTION)
    if start < 0:
        raise ValueError(f"README.md has no {SECTION!r} section")
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end >= 0 else len(text)]
    blocks = []
    for block in FENCE.findall(section):
        lines = (COMMENT.sub("", line).rstrip() for line in block.splitlines())
        blocks.append([line for line in lines if line.strip()])
    return blocks


def install_lines(text: str) -> list[str]:
    blocks = quickstart_blocks(text)
    if not blocks or not any(line.lstrip().startswith("pip install") for line in blocks[0]):
        raise ValueError(f"README.md's {SECTION!r}: its first bash block installs nothing")
    return blocks[0]


def test_command(text: str) -> str:
    for block in quickstart_blocks(text)[1:]:
        for line in block:
            if line.split()[:2] == ["pytest", "tests"]:
                return line.strip()
    raise ValueError(f"README.md's {SECTION!r}: no `pytest tests` line after the install block")


def main(argv: list[str]) -> int:
    what = argv[1] if len(argv) == 2 else ""
    if what not in ("install", "test"):
        print("usage: quickstart.py install|test", file=sys.stderr)
        return 2
    text = README.read_text(encoding="utf-8")
    try:
        print("\n".join(install_lines(text)) if what == "install" else test_command(text))
    except ValueError as exc:
        print(f"quickstart: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
