"""The class's similarity check (conformance/classroom/similarity.py): copies are flagged, runners
written apart are not, pairs are cached, what a runner wrote reaches the page and the CSV as text,
and `class` says in one line when it cannot compare.

The class compared is bench/similarity.py's: zoo mutants, the tests' own runners, and disguised
copies of the reference, of a style and of a classmate.
"""

import csv
import importlib.util
import io
import os
import sys
from pathlib import Path

import pytest

from conformance.classroom import command, grading, layout, similarity
from conformance.classroom.report_html import render
from conformance.lab import config
from conformance.reporting import provenance
from tests.test_class_report import Page, chromium, headless, screenshot

pytest.importorskip("copydetect", reason="the similarity check compares code with copydetect (the similarity extra)")

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _bench():
    sys.path.insert(0, str(BENCH))  # its shared parts (oneline.py)
    try:
        spec = importlib.util.spec_from_file_location("bench_similarity", str(BENCH / "similarity.py"))
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


bench = _bench()


# The test class's recommented and reformatted copies are made with ast.unparse, which Python 3.9
# brought; the check itself runs on 3.8 too (the class tests below use other disguises).
needs_unparse = pytest.mark.skipif(
    sys.version_info < (3, 9), reason="the disguised copies are made with ast.unparse (Python 3.9+)"
)


# The test class of 62 runners judges the thresholds (copydetect's tokens, the words compared),
# which no interpreter changes: its tests are marked once (tox.ini), not run in every env.
@pytest.fixture(scope="module")
def compared():
    texts, lineage, copies = bench.make_class(40)
    return bench.measure(texts), texts, lineage, copies


@pytest.mark.once
@needs_unparse
def test_the_test_class_holds_60_runners_and_every_disguise(compared):
    _outcome, texts, _lineage, copies = compared
    assert len(texts) >= 60
    assert {name.rsplit("-", 1)[-1] for name in copies} >= {"renamed", "reordered", "recommented", "reformatted"}
    assert any("reference" in name for name in copies) and any("styles" in name for name in copies)
    assert any("test-" in name for name in copies) and "copy-rewritten-by-hand" in copies


@pytest.mark.once
@needs_unparse
def test_every_disguised_copy_is_flagged_similar_to_its_source(compared):
    outcome, _texts, lineage, copies = compared
    flagged = {
        name
        for pair in outcome.similar
        for one, other in ((pair.first, pair.second), (pair.second, pair.first))
        for name in [one.name]
        if name in copies and bench.lineage_of(other, lineage) == copies[name]
    }
    assert flagged == set(copies)


@pytest.mark.once
@needs_unparse
def test_the_copy_rewritten_by_hand_is_seen_by_its_words_alone(compared):
    outcome, _texts, _lineage, _copies = compared
    pair = next(
        pair
        for pair in outcome.pairs
        if pair.first.name == "copy-rewritten-by-hand" and pair.second.name == bench.REWRITTEN_FROM
    )
    assert pair.similar and pair.code < outcome.code_threshold <= 1
    assert pair.behaviour >= outcome.behaviour_threshold
    said = {pair.first.words[word] for word in pair.shared}
    assert "timeout: command killed after %d seconds" in said


@pytest.mark.once
@needs_unparse
def test_no_pair_of_runners_of_different_lineages_is_flagged(compared):
    outcome, _texts, lineage, _copies = compared
    assert [
        (pair.first.label, pair.second.label)
        for pair in outcome.similar
        if bench.lineage_of(pair.first, lineage) != bench.lineage_of(pair.second, lineage)
    ] == []


def test_the_nine_correct_runners_written_apart_are_not_similar_to_each_other():
    public = [
        similarity.make_runner(name, similarity.STUDENT, text) for name, text in similarity.public_runners().items()
    ]
    assert len(public) == 9
    outcome = similarity.compare_class(public, [])
    assert len(outcome.pairs) == 36
    assert outcome.similar == [], [(p.first.name, p.second.name, p.code, p.behaviour) for p in outcome.similar]
    # Some margin below the thresholds, not a near miss.
    assert max(pair.code for pair in outcome.pairs) < config.CODE_THRESHOLD - 0.1
    assert max(pair.behaviour for pair in outcome.pairs) < config.BEHAVIOUR_THRESHOLD


def test_only_pairs_that_touch_a_changed_submission_are_compared_again(tmp_path):
    texts = {"s%d" % n: text for n, text in enumerate(sorted(bench.test_runners().values())[:4])}
    texts["copy"] = bench.renamed(similarity.public_runners()["reference"])
    cache = tmp_path / similarity.CACHE_NAME
    first = bench.measure(texts, cache)
    assert first.compared == len(first.pairs) == 10 + 5 * 9
    again = bench.measure(texts, cache)
    assert again.compared == 0
    assert [(p.first.name, p.second.name, p.code) for p in again.pairs] == [
        (p.first.name, p.second.name, p.code) for p in first.pairs
    ]
    texts["s0"] += "\nCHANGED = 1\n"
    changed = bench.measure(texts, cache)
    assert changed.compared == 4 + 9  # s0 against its 4 classmates and the 9 public runners


def test_a_template_the_teacher_hands_out_is_left_out():
    shared = bench.renamed(similarity.public_runners()["styles/timer_runner"])
    one = similarity.make_runner("one", similarity.STUDENT, shared + "\nprint('alpha beta gamma one')\n")
    two = similarity.make_runner("two", similarity.STUDENT, shared + "\nprint('delta epsilon two')\n")
    assert similarity.compare_class([one, two], []).pairs[0].similar
    kept = similarity.compare_class([one, two], [], templates=[shared]).pairs[0]
    assert kept.code < 0.2 and kept.behaviour == 0 and not kept.similar


HOSTILE = (
    "import sys\n"
    "def main():\n"
    "    print('<script>alert(1)</script> \\x1b[2J erased \\u202e reversed words here', file=sys.stderr)\n"
    "    print('=HYPERLINK(\"http://x\") formula cell with words', file=sys.stderr)\n"
    "    print('another message of the hostile runner', file=sys.stderr)\n"
    "    return 0\n"
    "if __name__ == '__main__':\n"
    "    sys.exit(main())\n"
)


def test_what_a_runner_wrote_reaches_the_page_and_the_csv_as_text():
    one = similarity.make_runner("=cmd|' /C calc'!A0", similarity.STUDENT, HOSTILE)
    two = similarity.make_runner("<b>bob</b>\u202e", similarity.STUDENT, HOSTILE.replace("main", "entry"))
    outcome = similarity.compare_class([one, two], [])
    assert outcome.similar
    page = render([], similar=outcome)
    parsed = Page(page)
    assert "script" not in {tag for tag, _ in parsed.elements}
    assert "&lt;b&gt;bob&lt;/b&gt;" in page and "<b>bob</b>" not in page
    assert "\x1b" not in page and "\u202e" not in page and "\\u202e" in page
    assert "&lt;script&gt;" in page
    rows = list(csv.reader(io.StringIO(similarity.csv_text(outcome))))
    assert rows[0] == similarity.CSV_COLUMNS
    assert rows[1][0].startswith("'=") and "\u202e" not in "".join(rows[1]) and "\x1b" not in "".join(rows[1])


def test_a_submission_is_read_capped_and_never_through_a_link(tmp_path):
    big = tmp_path / "big.py"
    big.write_bytes(b"x" * (similarity.READ_LIMIT + 10))
    assert len(similarity.read_capped(big) or "") == similarity.READ_LIMIT
    link = tmp_path / "link.py"
    link.symlink_to("/etc/passwd")
    assert similarity.read_capped(link) is None
    os.mkfifo(str(tmp_path / "fifo.py"))
    assert similarity.read_capped(tmp_path / "fifo.py") is None


def test_a_source_that_does_not_parse_says_no_words():
    assert similarity.own_words("def (:\n") == {}
    assert similarity.own_words("x = " + "(" * 5000 + ")" * 5000) == {} or True  # no exception is the point


def test_the_similarity_settings_are_read_and_checked():
    lab = config.loads('[similarity]\ncode = 0.7\nbehaviour = 0.4\nknown = "known"\ntemplate = "t.py"\n')
    assert lab.similarity == config.SimilarityConfig(0.7, 0.4, "known", ("t.py",))
    assert config.load().similarity == config.SimilarityConfig()
    for text, said in [
        ("[similarity]\ncode = 0\n", "similarity.code = 0"),
        ("[similarity]\nbehaviour = 1.5\n", "similarity.behaviour = 1.5"),
        ("[similarity]\nknwon = 'x'\n", "similarity.knwon: no such setting"),
        ("[similarity]\ntemplate = [1]\n", "similarity.template = [1]"),
        ("similarity = 3\n", "similarity: a table"),
    ]:
        with pytest.raises(config.ConfigError, match=said.replace("[", r"\[").replace(".", r"\.")):
            config.loads(text)
    changed = config.differences(config.loads(""), config.loads("[similarity]\ncode = 0.8\n"))
    assert changed == ["similarity code: 0.6 -> 0.8"]


# --- in the class command --------------------------------------------------------------------------


def _class(tmp_path: Path):
    """A class of four (a disguised copy of the reference, a copy of it by a classmate, two runners
    of their own) and a folder of known solutions."""
    submissions = tmp_path / "subs"
    submissions.mkdir()
    reference = similarity.public_runners()["reference"]
    # Disguises that need no ast.unparse: the class's path is tested on every Python, 3.8 too.
    (submissions / "alice.py").write_text(bench.renamed(bench.reordered(reference)))
    (submissions / "bob.py").write_text(bench.reordered(bench.renamed(bench.renamed(reference))))
    own = sorted(bench.test_runners().values(), key=len)
    (submissions / "carol.py").write_text(own[-1])
    (submissions / "dave.py").write_text(bench.REWRITTEN)
    known = tmp_path / "known"
    known.mkdir()
    (known / "last-year.py").write_text(bench.reordered(own[-1]))
    return submissions, known


def _fake_gradings(_unused=None):
    """Gradings that end at once (each an error that names the runner): the similarity check runs
    after whatever gradings did, and these need no lab."""

    def grade(jobs, settings, done):
        for job in jobs:
            done(
                job,
                {
                    "status": grading.ERROR,
                    "message": "not graded here",
                    "seconds": 0,
                    "suite": provenance.suite_fingerprint(),
                },
            )

    return grade


def test_class_compares_after_the_gradings_and_again_only_what_changed(tmp_path, monkeypatch, capsys):
    submissions, known = _class(tmp_path)
    monkeypatch.setattr(
        command, "run_local", lambda jobs, settings, parallel, done: _fake_gradings(0)(jobs, settings, done)
    )
    out = tmp_path / "out"
    argv = [str(submissions), "--out", str(out), "-j", "1", "--known", str(known)]
    assert command.main_class(argv) == 1  # every "grading" is an error here
    said = capsys.readouterr()
    assert "similarity: 4 submission(s) compared in pairs and with 10 other runner(s)" in said.out
    rows = list(csv.DictReader(io.StringIO((out / layout.SIMILARITY).read_text())))
    similar = {(row["first"], row["second"]) for row in rows if row["similar"]}
    assert {("alice", "bob"), ("alice", "reference"), ("bob", "reference")} <= similar
    assert ("carol", "last-year") in similar and ("dave", "styles/int_timeout_runner") in similar
    assert not {pair for pair in similar if "carol" in pair and "last-year" not in pair}
    page = Page((out / layout.REPORT).read_text())
    pairs = page.having("data-behaviour")
    assert len(pairs) == len(similar) and all(float(p["data-code"]) >= 0 for p in pairs)
    cache = out / layout.SIMILARITY_CACHE
    assert cache.exists()
    # Resumed: nothing changed, nothing compared; one changed, only its pairs.
    (submissions / "dave.py").write_text(bench.REWRITTEN + "\n# changed\n")
    assert command.main_class(argv) == 1
    assert "similarity: 4 submission(s)" in capsys.readouterr().out


def test_without_copydetect_class_says_so_in_one_line_and_grades_as_before(tmp_path, monkeypatch, capsys):
    submissions, _known = _class(tmp_path)
    monkeypatch.setattr(
        command, "run_local", lambda jobs, settings, parallel, done: _fake_gradings(0)(jobs, settings, done)
    )
    monkeypatch.setattr(
        similarity, "unavailable", lambda: "copydetect is not installed (pip install 'pyops-lab[similarity]')"
    )
    out = tmp_path / "out"
    assert command.main_class([str(submissions), "--out", str(out), "-j", "1"]) == 1
    said = capsys.readouterr()
    lines = [line for line in said.err.splitlines() if "similarity" in line]
    assert lines == ["similarity was not computed: copydetect is not installed (pip install 'pyops-lab[similarity]')"]
    assert "Traceback" not in said.err
    assert (out / layout.GRADES).exists() and not (out / layout.SIMILARITY).exists()
    assert "not computed: copydetect is not installed" in (out / layout.REPORT).read_text()


def test_with_a_broker_the_class_is_compared_the_same(tmp_path, monkeypatch, capsys):
    submissions, known = _class(tmp_path)
    from conformance.classroom import distributed

    monkeypatch.setattr(command, "_broker", lambda options: ("redis://broker.invalid:6379/0", b"k" * 32))
    monkeypatch.setattr(distributed, "queue", lambda url, key, settings: _fake_gradings(0))
    out = tmp_path / "out"
    assert command.main_class([str(submissions), "--out", str(out), "--broker", "--known", str(known)]) == 1
    assert "similarity: 4 submission(s) compared" in capsys.readouterr().out
    rows = list(csv.DictReader(io.StringIO((out / layout.SIMILARITY).read_text())))
    assert ("alice", "bob") in {(row["first"], row["second"]) for row in rows if row["similar"]}


def test_a_known_folder_that_is_not_one_is_a_usage_error(tmp_path, capsys):
    submissions, _known = _class(tmp_path)
    argv = [str(submissions), "--out", str(tmp_path / "out"), "--known", str(tmp_path / "nowhere")]
    assert command.main_class(argv) == 2
    assert "--known %s: not a folder" % (tmp_path / "nowhere") in capsys.readouterr().err


# --- in a browser ---------------------------------------------------------------------------------------


@pytest.mark.slow(3)
@pytest.mark.once
@needs_unparse
def test_chromium_shows_the_similar_pairs_side_by_side(tmp_path):
    browser = chromium()
    texts, _lineage, copies = bench.make_class(5)
    chosen = {name: texts[name] for name in list(copies)[:4] + ["copy-rewritten-by-hand"]}
    outcome = bench.measure(chosen)
    artifacts = Path(os.environ.get("PYOPS_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    report = artifacts / "class-similarity.html"
    report.write_text(render([], similar=outcome), encoding="utf-8")
    dom = headless(browser, tmp_path / "profile-dom", "--dump-dom", report.as_uri()).stdout.decode("utf-8")
    page = Page(dom)
    assert "similarity" in [attributes.get("id") for tag, attributes in page.elements if tag == "section"]
    shown = page.having("data-behaviour")
    assert len(shown) == min(len(outcome.similar), 40)
    ranks = [max(float(p["data-code"]), float(p["data-behaviour"])) for p in shown]
    assert ranks == sorted(ranks, reverse=True)
    assert "mark" in {tag for tag, _ in page.elements}
    screenshot(browser, tmp_path / "profile-shot", report, artifacts / "class-similarity.png", 1280, 1600)
