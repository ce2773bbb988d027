"""The CLI reference page, written from the suite's own argument parsers when the site is built.

A MkDocs hook (mkdocs.yml `hooks:`): docs/cli.md holds a placeholder comment, and this module puts
in its place the `--help` of `pyops-conformance` and of every command of its COMMANDS table, as
the command itself prints it. A committed copy of the help texts would drift from the code; this
cannot. tests/test_docs.py imports it too, without MkDocs.
"""

import contextlib
import io
import os
import re
from typing import Iterator, List, Tuple

PLACEHOLDER = re.compile(r"<!-- cli-reference:.*?-->", re.S)
# Help is wrapped to the terminal's width: a fixed one keeps the page the same on every machine.
WIDTH = "100"


def help_text(argv: List[str]) -> str:
    """What `pyops-conformance ARGV` prints, run in this process through the CLI's own dispatch."""
    from conformance import cli

    out = io.StringIO()
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            try:
                cli.main(argv)
            except SystemExit:  # argparse's --help ends with it
                pass
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved
    text = out.getvalue()
    if "usage:" not in text:
        raise RuntimeError("pyops-conformance %s printed no help" % " ".join(argv))
    return text


def commands() -> Iterator[Tuple[str, str, List[str]]]:
    """(heading, what it does, argv) for the grading command and each command of COMMANDS."""
    from conformance import cli

    yield "pyops-conformance", "grade one runner.py against the lab", ["--help"]
    for name, (_, said) in cli.COMMANDS.items():
        yield "pyops-conformance %s" % name, said, [name, "--help"]


def reference() -> str:
    """The page's body: one section per command, its summary and its help in a code block."""
    sections = []
    for heading, said, argv in commands():
        sections.append("## %s\n\n%s.\n\n```text\n%s```\n" % (heading, said[:1].upper() + said[1:], help_text(argv)))
    return "\n".join(sections)


def on_page_markdown(markdown: str, page, config, files) -> str:  # MkDocs calls it with these four
    if page.file.src_uri != "cli.md":
        return markdown
    if not PLACEHOLDER.search(markdown):
        raise RuntimeError("docs/cli.md lost its cli-reference placeholder")
    return PLACEHOLDER.sub(lambda _: reference(), markdown, count=1)
