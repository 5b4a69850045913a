"""The docs as a whole: the README's length, the site's strict build, links, and that every fenced
block of every page is a test item (the items themselves come from conftest.py, via sybil)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docblocks import DIRECTIVE, ROOT, SYBIL, documents, parse_directive

README_MAX_LINES = 250
FENCE_OPEN = re.compile(r"^[ \t]*(`{3,}|~{3,})", re.MULTILINE)


def _fences(text: str) -> int:
    """Fenced blocks in a markdown text, counted the plain way (an opening fence, then the first
    line that closes it)."""
    count, open_fence = 0, None
    for line in text.splitlines():
        stripped = line.strip()
        if open_fence is None:
            m = re.match(r"(`{3,}|~{3,})", stripped)
            if m:
                open_fence = m.group(1)
                count += 1
        elif re.fullmatch(re.escape(open_fence[0]) + "{%d,}" % len(open_fence), stripped):
            open_fence = None
    return count


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail to docs/")


def test_every_document_is_parsed():
    pages = sorted((ROOT / "docs").rglob("*.md"))
    assert pages, "docs/ holds no page"
    missing = [str(p.relative_to(ROOT)) for p in [ROOT / "README.md", *pages]
               if not SYBIL.should_parse(p)]
    assert not missing, f"not matched by the sybil patterns: {missing}"
    assert documents() == [ROOT / "README.md", *pages]


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fenced_block_is_an_item(doc: Path):
    """Each fenced block of the document yields one sybil example (one test item)."""
    document = SYBIL.parse(doc)
    examples = list(document.examples())
    assert len(examples) == _fences(document.text)


def _directives(text: str):
    for m in re.finditer(r"^[ \t]*<!--\s*((?:skip|docs)\s*:.*?)\s*-->[ \t]*$", text,
                         re.MULTILINE | re.DOTALL):
        yield m


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_directives_precede_a_block(doc: Path):
    """Every directive parses and sits right before a fenced block (a dangling one would silently
    exempt nothing, or the wrong block after an edit)."""
    text = doc.read_text(encoding="utf-8")
    for m in _directives(text):
        parse_directive(m.group(1))
        assert DIRECTIVE.search(m.group(0))
        after = text[m.end():].lstrip("\n")
        assert FENCE_OPEN.match(after), (
            f"{doc.name}: directive {m.group(0)!r} is not followed by a code block")


def _heading_slugs(text: str) -> set[str]:
    """The anchors mkdocs gives the headings of a page (python-markdown's toc slugify)."""
    from markdown.extensions.toc import slugify

    slugs, seen = set(), {}
    in_fence = False
    for line in text.splitlines():
        if re.match(r"\s*(```|~~~)", line):
            in_fence = not in_fence
            continue
        m = None if in_fence else re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slugify(re.sub(r"[`*_]", "", m.group(2)), "-")
            n = seen.get(base, 0)
            slugs.add(base if n == 0 else f"{base}_{n}")
            seen[base] = n + 1
    return slugs


LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_links_resolve():
    """Every relative link of the README names a file, and its anchor a heading there."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        file = (ROOT / path) if path else ROOT / "README.md"
        assert file.exists(), f"README links to {target}: no such file"
        if anchor and file.suffix == ".md":
            slugs = _heading_slugs(file.read_text(encoding="utf-8"))
            if path == "":
                slugs |= _github_slugs(text)
            assert anchor in slugs, f"README links to {target}: no such heading"


def _github_slugs(text: str) -> set[str]:
    """GitHub's anchors for the README's own headings (lower case, punctuation dropped)."""
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*$", text, re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        out.add(slug)
    return out


def _nav_pages() -> list[str]:
    yaml = pytest.importorskip("yaml")

    class Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml may carry python tags (!!python/name:...) for extensions: keep them as text
    Loader.add_multi_constructor("tag:yaml.org,2002:python/",
                                 lambda loader, suffix, node: None)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)

    pages: list[str] = []

    def walk(node):
        if isinstance(node, str):
            pages.append(node)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)

    walk(config["nav"])
    return pages


def test_readme_links_every_page():
    """The README's Documentation section reaches every page of the site."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {t.partition("#")[0] for t in LINK.findall(text)}
    missing = [p for p in _nav_pages() if f"docs/{p}" not in linked]
    assert not missing, f"README.md links no docs page of: {missing}"


def test_nav_lists_every_page():
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert sorted(pages) == sorted(set(_nav_pages()))


def test_mkdocs_build_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs-material is not installed: pip install -r requirements-dev.txt "
                    "-c constraints.txt")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q",
                           "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "index.html").is_file()


def test_calls_of_the_reusable_workflow_match_its_inputs():
    """Every ``uses: .../conformance.yml@REF`` job in the docs passes only inputs the workflow
    declares, and every input it requires."""
    yaml = pytest.importorskip("yaml")
    from docblocks import Block

    workflow = yaml.safe_load((ROOT / ".github/workflows/conformance.yml").read_text("utf-8"))
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    inputs = trigger["workflow_call"]["inputs"]
    required = {name for name, spec in inputs.items() if spec.get("required")}
    calls = 0
    for doc in documents():
        for example in SYBIL.parse(doc).examples():
            block = example.parsed
            if not (isinstance(block, Block) and block.language in ("yaml", "yml")):
                continue
            data = yaml.safe_load(block.source) or {}
            for job in (data.get("jobs") or {}).values():
                if not str(job.get("uses", "")).split("@")[0].endswith(
                        ".github/workflows/conformance.yml"):
                    continue
                calls += 1
                given = set(job.get("with") or {})
                where = f"{doc.relative_to(ROOT)} line {block.line}"
                unknown, missing = sorted(given - set(inputs)), sorted(required - given)
                assert not unknown, f"{where}: inputs the workflow does not declare: {unknown}"
                assert not missing, f"{where}: required inputs missing: {missing}"
                assert "@" in job["uses"] and job["with"].get("harness-ref"), f"{where}: pin refs"
    assert calls >= 2, "the README and docs/ci.md call the reusable workflow"


def test_the_block_checks_can_fail():
    """A wrong option, candidate, file or path in a bash block fails its item."""
    from docblocks import bash_commands, check_command

    assert bash_commands("a --x 1 \\\n  --y 2 || [ $? -le 1 ]  # note\nK=1 b; c && d\n") == [
        ["a", "--x", "1", "--y", "2"], ["[", "$?", "-le", "1", "]"], ["b"], ["c"], ["d"]]
    for line, expected in [
            ("pytest suites --candidate exact --no-such-option -n 2", "unrecognized arguments"),
            ("pytest suites --candidate no-such-sampler", "no-such-sampler"),
            ("python -m pytest suites --cases no-such-case", "no-such-case"),
            ("pip install -r requirements-nope.txt -c constraints.txt", "requirements-nope.txt"),
            ("pytest tests/e2e/test_no_such_file.py -n 2", "tests/e2e/test_no_such_file.py"),
            ("python -m reports no-such-subcommand DIR", "no-such-subcommand"),
            ("tox -e no-such-env", "no-such-env")]:
        (command,) = bash_commands(line)
        with pytest.raises(AssertionError, match=re.escape(expected)):
            check_command(command)


def _quickstart(what: str) -> str:
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "quickstart.py"), what],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_ci_runs_the_readme_quick_start_as_written():
    """.ci/run installs with the quick start's own lines and runs its own test command, so they
    cannot drift: here, that those lines are found, install everything `pytest tests` imports
    (the dev requirements: sybil, import-linter, PyYAML), and that .ci/run evaluates them."""
    install = _quickstart("install").splitlines()
    assert install[0].startswith("python3 -m venv .venv") and ". .venv/bin/activate" in install[0]
    pip = [line for line in install if line.startswith("pip install")]
    assert len(pip) == 1
    for need in ("torch==2.13.0", "-r requirements.txt", "-r requirements-dev.txt",
                 "-c constraints.txt"):
        assert need in pip[0], need
    dev = (ROOT / "requirements-dev.txt").read_text()
    for package in ("sybil", "import-linter", "pyyaml", "mkdocs-material"):
        assert re.search(rf"^{package}\b", dev, re.M), package
    assert _quickstart("test").strip() == "pytest tests -n 2"
    run = (ROOT / ".ci" / "run").read_text()
    assert 'eval "$install_lines"' in run and 'eval "$test_command"' in run


def test_the_quick_start_reader_refuses_a_readme_without_its_blocks(tmp_path):
    sys.path.insert(0, str(ROOT / ".ci"))
    try:
        import quickstart
    finally:
        sys.path.remove(str(ROOT / ".ci"))
    with pytest.raises(ValueError, match="installs nothing"):
        quickstart.install_lines("## Quick start\n\n```bash\npytest tests -n 2\n```\n")
    with pytest.raises(ValueError, match="no `pytest tests` line"):
        quickstart.test_command("## Quick start\n\n```bash\npip install x\n```\n## Next\n"
                                "```bash\npytest tests -n 2\n```\n")


def test_every_fault_in_the_table_names_tests_that_exist():
    """docs/faults.md: each row names the test that proves it; every such test is a function
    defined in that file (a renamed or deleted test fails here)."""
    import ast

    text = (ROOT / "docs" / "faults.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "::" in line]
    assert len(rows) >= 25, len(rows)
    for row in rows:
        names = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", row)
        assert names, f"a fault without its test: {row[:80]}"
        for path, name in names:
            tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            assert name in defined, f"{path}::{name} (docs/faults.md) does not exist"


def test_the_install_page_and_the_home_page_say_the_readmes_quick_start():
    """The quick start is written in three places a newcomer reads: the README (which CI runs),
    docs/install.md (the same two blocks, their comments included: the times the commands take
    are stated there, and two figures for one command would disagree sooner or later) and
    docs/index.md (the same install line)."""
    sys.path.insert(0, str(ROOT / ".ci"))
    try:
        import quickstart
    finally:
        sys.path.remove(str(ROOT / ".ci"))

    def as_written(path):
        text = path.read_text(encoding="utf-8")
        start = text.index(quickstart.SECTION)
        return quickstart.FENCE.findall(text[start:text.find("\n## ", start + 1)])

    readme = quickstart.quickstart_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    install = quickstart.quickstart_blocks((ROOT / "docs" / "install.md").read_text(encoding="utf-8"))
    assert install[:2] == readme[:2]
    assert as_written(ROOT / "docs" / "install.md")[:2] == as_written(ROOT / "README.md")[:2]
    pip = next(line for line in readme[0] if line.startswith("pip install"))
    assert pip in (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
