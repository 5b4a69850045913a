"""``--xfails-file auto``: the shipped xfails file is chosen by the releases its header says it was
measured on, a torch release no file was measured on gets none and one line saying so, and the
README's findings name every release a shipped file claims. A line may name a mechanism
(``GLOB mechanism=NAME  # cause``); a line that is not of the format is one line naming it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from harness.session.xfails import (SHIPPED_DIR, XfailsChoiceError, XfailsFormatError,
                                    choose_xfails, load_xfails, measured_releases, release_of)

ROOT = Path(__file__).resolve().parents[3]


def _shipped() -> list[Path]:
    return sorted(SHIPPED_DIR.glob("*.txt"))


def test_every_shipped_file_names_the_releases_it_was_measured_on():
    assert _shipped(), "xfails/ holds no file"
    for path in _shipped():
        releases = measured_releases(path)
        assert releases, f"{path.name}: no '# measured on torch: ...' line in its header"
        assert all(re.fullmatch(r"\d+\.\d+\.\d+", r) for r in releases), releases
        assert load_xfails(str(path)), f"{path.name}: no pattern"


def test_no_two_shipped_files_claim_one_release():
    claimed = [r for path in _shipped() for r in measured_releases(path)]
    assert len(claimed) == len(set(claimed)), claimed


def test_the_readme_states_the_verdicts_of_every_measured_release():
    """A release goes into a header only with its findings: the README's Findings name it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    findings = readme[readme.index("## Findings"):]
    findings = findings[:findings.index("\n## ", 1)]
    for path in _shipped():
        for release in measured_releases(path):
            assert re.search(rf"(?<![\d.]){re.escape(release)}(?![\d])", findings), (
                f"{path.name} says it was measured on torch {release}; README's Findings do not "
                f"state its verdicts")


@pytest.mark.parametrize("version, release", [("2.14.1+cu130", "2.14.1"), ("2.13.0+cpu", "2.13.0"),
                                              ("2.13.0", "2.13.0")])
def test_release_drops_the_local_build_tag(version, release):
    assert release_of(version) == release


def test_a_measured_release_gets_its_file_whatever_its_build():
    for path in _shipped():
        for release in measured_releases(path):
            for version in (release, f"{release}+cpu", f"{release}+cu130"):
                chosen, line = choose_xfails(version)
                assert chosen == str(path)
                assert line.startswith("--xfails-file auto: xfails/") and version in line


#: The releases docs/findings/torch.md measured on the pr grid, each with its own run (a release's
#: kernels may write other values than another's with the same Python code): auto picks a file
#: for each, whatever its build.
MEASURED_RELEASES = ("2.12.1", "2.13.0", "2.14.1", "2.15.0")


@pytest.mark.parametrize("release", MEASURED_RELEASES)
def test_auto_picks_a_file_for_every_measured_release(release):
    for version in (release, f"{release}+cpu", f"{release}+cu130", f"{release}+cu132"):
        chosen, line = choose_xfails(version)
        assert chosen is not None, line
        shown = Path(chosen).relative_to(ROOT).as_posix()
        assert line == (f"--xfails-file auto: {shown} (measured on torch "
                        f"{', '.join(measured_releases(chosen))}) for the installed torch {version}")


def test_measured_torch_pins_the_last_measured_release():
    """tox -e measured-torch is the base the nightly judges the newest torch against: the newest
    release a shipped file was measured on, and no other."""
    releases = [r for path in _shipped() for r in measured_releases(path)]
    last = max(releases, key=lambda r: tuple(int(x) for x in r.split(".")))
    tox = (ROOT / "tox.ini").read_text(encoding="utf-8")
    env = re.search(r"^\[testenv:measured-torch\]\n(.*?)(?=^\[|\Z)", tox, re.M | re.S)
    assert env is not None, "tox.ini has no [testenv:measured-torch]"
    assert re.findall(r"torch==([\d.]+)", env.group(1)) == [last]


def test_a_release_no_file_was_measured_on_gets_none_and_one_line():
    for version in ("2.12.0", "2.14.0", "2.16.0+cu130", "2.11.0"):
        chosen, line = choose_xfails(version)
        assert chosen is None
        assert "\n" not in line
        assert f"no xfails file was measured on the installed torch {version}" in line
        assert "every failure counts as new" in line


def test_the_choice_reads_the_headers(tmp_path):
    (tmp_path / "old.txt").write_text("# measured on torch: 2.1.0, 2.1.2\ngof[*]  # c\n")
    (tmp_path / "new.txt").write_text("# Known failures\n# Measured on torch: 2.2.0\n\n"
                                      "gof[*]  # c\n# measured on torch: 2.9.9\n")
    (tmp_path / "mine.txt").write_text("gof[*]  # no header\n")
    assert choose_xfails("2.1.2", tmp_path)[0] == str(tmp_path / "old.txt")
    assert choose_xfails("2.2.0+cpu", tmp_path)[0] == str(tmp_path / "new.txt")
    chosen, line = choose_xfails("2.9.9", tmp_path)  # below the first pattern: not the header
    assert chosen is None and "old.txt: 2.1.0, 2.1.2" in line and "new.txt: 2.2.0" in line


def test_two_files_claiming_one_release_is_an_error(tmp_path):
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("# measured on torch: 2.3.0\ngof[*]  # c\n")
    with pytest.raises(XfailsChoiceError, match="a.txt.*b.txt.*measured on torch 2.3.0"):
        choose_xfails("2.3.0", tmp_path)


def test_auto_as_an_option(parse, monkeypatch):
    opt = parse(xfails_file="auto")
    assert (opt.xfails_file, opt.xfails_choice) == choose_xfails(torch.__version__)
    monkeypatch.setattr(torch, "__version__", "2.12.0")
    opt = parse(xfails_file="auto")
    assert opt.xfails_file is None and "torch 2.12.0" in opt.xfails_choice
    assert parse().xfails_choice is None


def test_a_line_may_name_a_mechanism(tmp_path):
    path = tmp_path / "xfails.txt"
    path.write_text("*[torch-abs-bounds-trap*-bfloat16-*]  mechanism=coarse-uniform  # k = 9\n"
                    "gof[torch-tail-5-*]  # any failure\n")
    by_mechanism, plain = load_xfails(str(path))
    assert (by_mechanism.pattern, by_mechanism.mechanism, by_mechanism.cause) == (
        "*[torch-abs-bounds-trap*-bfloat16-*]", "coarse-uniform", "k = 9")
    name = "atoms[torch-abs-bounds-trap-bfloat16-cpu]"
    assert by_mechanism.matches(name, "coarse-uniform")
    assert not by_mechanism.matches(name, "clamp") and not by_mechanism.matches(name)
    assert not by_mechanism.matches("atoms[torch-abs-bounds-trap-float32-cpu]", "coarse-uniform")
    assert plain.mechanism is None
    assert plain.matches("gof[torch-tail-5-float32-cpu]", "anything")
    assert plain.matches("gof[torch-tail-5-float32-cpu]")


@pytest.mark.parametrize("text, says", [
    ("gof[*] coarse-uniform  # c", "line 1: expected 'GLOB [mechanism=NAME]  # cause'"),
    ("gof[*] mechanism=a mechanism=b  # c", "line 1: expected 'GLOB [mechanism=NAME]"),
    ("gof[*] mechanism=  # c", "line 1: mechanism '' is not a mechanism's name"),
    ("gof[*] mechanism=Coarse_Uniform  # c", "line 1: mechanism 'Coarse_Uniform'"),
])
def test_a_bad_line_is_one_line(tmp_path, text, says):
    path = tmp_path / "xfails.txt"
    path.write_text(text + "\n")
    with pytest.raises(XfailsFormatError) as info:
        load_xfails(str(path))
    assert says in str(info.value) and "\n" not in str(info.value)


def test_the_shipped_files_read_with_the_mechanism_syntax():
    for path in _shipped():
        assert all(p.mechanism is None or p.mechanism for p in load_xfails(str(path)))
