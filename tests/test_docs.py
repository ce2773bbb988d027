"""The documentation: every page in the site's navigation, README's replayed commands shown alike
on the site, a CLI reference that covers every command, and the commands the pages show replayed.

The site itself is built in strict mode by tox's docs env (broken links and anchors fail there);
these tests need no MkDocs.
"""

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"

FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.M | re.S)
TITLE = re.compile(r'title="([^"]+)"')
REPLAY = re.compile(r"^<!-- replay(?P<options>[^\n]*?)-->\n(?P<body>.*?)^<!-- /replay -->$", re.M | re.S)


def pages() -> List[str]:
    """Every page under docs/, as the navigation names it (the hook's code is not a page)."""
    return sorted(str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md") if "hooks" not in path.parts)


def nav_pages() -> List[str]:
    # mkdocs.yml's nav entries are "- Title: page.md" lines; a YAML parser is not worth a dependency.
    text = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1]
    return re.findall(r"^\s+- [^:\n]+: (\S+\.md)\s*$", nav, re.M)


def sh_blocks(text: str) -> List[str]:
    return [code for language, _, code in FENCE.findall(text) if language == "sh"]


def marked(text: str, name: str) -> str:
    """What README.md holds between its `<!-- NAME` and `<!-- /NAME -->` markers."""
    return text.split("<!-- %s" % name, 1)[1].split("<!-- /%s -->" % name, 1)[0]


def test_every_page_is_in_the_navigation_and_every_entry_is_a_page():
    listed = nav_pages()
    assert sorted(listed) == pages(), "docs/ and mkdocs.yml's nav differ"
    assert len(listed) == len(set(listed)), "a page is listed twice"


@pytest.mark.parametrize(("section", "page"), [("newcomer", "index.md"), ("learner", "learner.md")])
def test_the_site_shows_the_commands_ci_replays_from_readme(section, page):
    # CI runs README's blocks in clean containers (docker/newcomer-test.sh, learner-test.sh): the
    # site shows the same lines, never an older copy.
    replayed = sh_blocks(marked(README.read_text(encoding="utf-8"), section))
    assert replayed, "README.md lost its %s section" % section
    shown = sh_blocks((DOCS / page).read_text(encoding="utf-8"))
    missing = [block for block in replayed if block not in shown]
    assert not missing, "docs/%s does not show README's %s commands: %s" % (page, section, missing)


def test_readme_is_short_states_the_test_command_and_links_only_to_pages_that_exist():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 120
    assert "The project's test command is **`tox`**" in text
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert links and all((REPO / link).is_file() for link in links), links


def load_hook():
    spec = importlib.util.spec_from_file_location("cli_reference", str(DOCS / "hooks" / "cli_reference.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_every_command_s_help_from_its_parser():
    from conformance import cli

    hook = load_hook()

    class Page:  # what the hook reads of MkDocs' page
        class file:
            src_uri = "cli.md"

    page = hook.on_page_markdown((DOCS / "cli.md").read_text(encoding="utf-8"), Page, None, None)
    assert "<!-- cli-reference" not in page
    assert "usage: pyops-conformance [-h]" in page and "--reference" in page
    for name in cli.COMMANDS:
        assert "## pyops-conformance %s\n" % name in page, name
        assert "usage: pyops-conformance %s" % name in page, name


class Replay(NamedTuple):
    page: str
    files: Dict[str, str]  # fenced blocks with a title: files written before the commands run
    commands: List[str]
    exit: int
    expect: List[str]
    grading: bool  # grades runners: run where the tests marked `once` run


def replays() -> List[Replay]:
    found = []
    for page in pages():
        for match in REPLAY.finditer((DOCS / page).read_text(encoding="utf-8")):
            words = shlex.split(match.group("options"))
            options = dict(word.split("=", 1) for word in words if "=" in word)
            expect = [word.split("=", 1)[1] for word in words if word.startswith("expect=")]
            files, commands = {}, []
            for language, info, code in FENCE.findall(match.group("body")):
                title = TITLE.search(info)
                if title:
                    files[title.group(1)] = code
                elif language == "sh":
                    commands.append(code)
            found.append(Replay(page, files, commands, int(options.get("exit", 0)), expect, "grading" in words))
    return found


def by_page() -> List:
    grouped: Dict[str, List[Replay]] = {}
    for replay in replays():
        grouped.setdefault(replay.page, []).append(replay)
    # A page's replays run in order in one folder: a later block reads what an earlier one made.
    return [
        pytest.param(page, marks=[pytest.mark.once, pytest.mark.slow(60)] if any(r.grading for r in steps) else [])
        for page, steps in sorted(grouped.items())
    ]


def test_the_pages_show_commands_to_replay_and_each_says_what_it_expects():
    found = replays()
    assert {replay.page for replay in found} >= {"class.md", "teacher.md", "learner.md"}
    for replay in found:
        assert replay.commands and replay.expect, replay


@pytest.mark.parametrize("page", by_page())
def test_the_commands_a_page_shows_run_as_shown(page, tmp_path, open_tmpdir):
    # Run where the pages say, in the project's folder: it holds runner/ (a class copies the
    # reference from there); what the commands write stays in this test's folder.
    (tmp_path / "runner").symlink_to(REPO / "runner")
    env = dict(open_tmpdir, PATH=os.pathsep.join([str(Path(sys.executable).parent), open_tmpdir.get("PATH", "")]))
    for replay in [replay for replay in replays() if replay.page == page]:
        for name, text in replay.files.items():
            (tmp_path / name).write_text(text, encoding="utf-8")
        script = "".join(replay.commands)
        ran = subprocess.run(
            ["bash", "-e", "-c", script], cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600
        )
        said = ran.stdout + ran.stderr
        assert ran.returncode == replay.exit, "%s: exit %d\n%s\n%s" % (page, ran.returncode, script, said)
        missing = [line for line in replay.expect if line not in said]
        assert not missing, "%s: %s not in the output of\n%s\n%s" % (page, missing, script, said)
