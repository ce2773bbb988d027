"""Generated mutants of the reference (conformance/selftest): how they are made, and how judged."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray", reason="cosmic-ray, which makes the mutants, supports Python 3.9 and later")

from cosmic_ray.mutating import MutationVisitor, mutate_code  # noqa: E402

from conformance.classroom import grading  # noqa: E402
from conformance.lab.config import DEFAULT_FILE  # noqa: E402
from conformance.selftest import generate, kill  # noqa: E402
from tests.grading import REFERENCE  # noqa: E402

SOURCE = REFERENCE.read_text(encoding="utf-8")
BENCH = Path(__file__).resolve().parents[1] / "bench" / "mutation.py"


@pytest.fixture(scope="module")
def mutants():
    return generate.generate(SOURCE)


@pytest.mark.parametrize("name", sorted(generate.LAB_OPERATORS))
def test_the_labs_own_operators_do_what_their_examples_say(name):
    for example in generate.LAB_OPERATORS[name].examples():
        assert mutate_code(example.pre_mutation_code, generate.operator(name), example.occurrence) == (
            example.post_mutation_code
        )


def test_every_mutant_compiles_changes_one_line_and_has_a_name_of_its_own(mutants):
    assert len(mutants) > 200
    assert len({mutant.key for mutant in mutants}) == len({mutant.name for mutant in mutants}) == len(mutants)
    for mutant in mutants:
        compile(mutant.text, mutant.name, "exec")
        assert mutant.text != SOURCE and mutant.before != mutant.after, mutant.key
        # cosmic-ray's own exception exists only in its workers: a graded runner must not name it.
        assert "CosmicRayTestingException" not in mutant.text, mutant.key
        diff = mutant.diff(SOURCE)
        assert diff.count("\n-") >= 1 and mutant.before in diff, mutant.key
    made = {mutant.operator for mutant in mutants}
    assert set(generate.LAB_OPERATORS) <= made, "a lab operator made no mutant of the reference"


@pytest.mark.once
def test_every_mutant_is_what_cosmic_ray_s_own_visitor_makes_of_that_occurrence(mutants):
    # generate.py finds every occurrence in one walk and mutates a copy of one node in place; the
    # visitor walks a fresh parse per mutant. Every mutant compared with what the visitor makes of
    # its occurrence (a sample would miss a wrong order: the last ones often agree). The parse is
    # parso's on every Python, hence once.
    for mutant in mutants:
        expected = MutationVisitor.mutate_code(SOURCE, generate.operator(mutant.operator), mutant.occurrence)
        assert expected is not None and generate.as_graded(expected) == mutant.text, mutant.key


def test_the_lab_operators_change_what_the_lab_pins(mutants):
    changes = {(mutant.before, mutant.after) for mutant in mutants if mutant.operator.startswith("lab/")}
    assert any("signal.SIGKILL" in before and "signal.SIGTERM" in after for before, after in changes)
    assert any('"duration_ms"' in before and '"duration_ms_"' in after for before, after in changes)
    assert any(after == "pass" for _, after in changes)
    # A docstring that happens to hold a pinned word is never renamed.
    assert not any(before.startswith('"""') for before, _ in changes)


def test_a_sample_is_the_same_for_a_seed_and_another_for_another(mutants):
    first, again, other = (kill.sample(mutants, 20, seed) for seed in (29, 29, 30))
    assert [m.key for m in first] == [m.key for m in again] and len(first) == 20
    assert [m.key for m in first] != [m.key for m in other]
    assert kill.sample(mutants, None, 29) == list(mutants)


def report(*failed):
    clauses = {"S1.1": "passed", "S2.1": "passed"}
    clauses.update({clause: "failed" for clause in failed})
    return {"clauses": {clause: {"verdict": verdict} for clause, verdict in clauses.items()}}


def test_a_timeout_or_an_error_is_never_a_kill():
    assert kill.judge({"status": grading.GRADED, "report": report("S2.1"), "seconds": 3})["verdict"] == kill.KILLED
    assert kill.judge({"status": grading.GRADED, "report": report(), "seconds": 3})["verdict"] == kill.SURVIVED
    assert kill.judge({"status": grading.TIMEOUT, "message": "did not end"})["verdict"] == kill.TIMEOUT
    assert kill.judge({"status": grading.ERROR, "message": "no report"})["verdict"] == kill.ERROR


def test_the_score_counts_timeouts_as_survivors_and_leaves_out_known_equivalents(mutants):
    some = mutants[:6]
    outcomes = [
        kill.Outcome(some[0], kill.KILLED, ["S2.1"]),
        kill.Outcome(some[1], kill.KILLED, ["S2.1", "S6.1"]),
        kill.Outcome(some[2], kill.TIMEOUT),
        kill.Outcome(some[3], kill.SURVIVED),
        kill.Outcome(some[4], kill.SURVIVED, equivalent="reviewed: no behaviour differs"),
        kill.Outcome(some[5], kill.ERROR),
    ]
    figures = kill.summary(outcomes, len(mutants))
    assert (figures["killed"], figures["survived"], figures["timeout"], figures["error"]) == (2, 2, 1, 1)
    assert figures["equivalent"] == 1 and figures["unexplained_survivors"] == 1
    assert figures["score"] == round(2 / 5, 4)
    assert figures["kills_per_clause"] == {"S2.1": 2, "S6.1": 1}


def test_a_core_survivor_is_graded_again_on_the_extended_profile():
    settings = kill.Settings(DEFAULT_FILE.read_text(encoding="utf-8"), None, "en", 4, 300)
    assert 'profile = "core"' in settings.config_text
    changed = kill.extended(settings).config_text
    assert 'profile = "extended"' in changed and 'profile = "core"' not in changed
    assert changed.count("\n") == settings.config_text.count("\n")
    assert kill.extended(kill.Settings("[points]\n", None, "en", 4, 300)).config_text.startswith(
        'profile = "extended"\n[points]'
    )


def test_each_mutant_is_reported_once_with_its_final_verdict(mutants, monkeypatch):
    """A core survivor is graded again on the extended profile; whoever listens (selftest's lines,
    the bench's) hears of it once, with the verdict that stands, never first as a survivor."""
    some = mutants[:3]  # killed on core; survives core and is killed by X2; survives both

    def grade(jobs, settings, parallel, done):
        extended = 'profile = "extended"' in settings.config_text
        for job in jobs:
            failed = {some[0].name: ("S2.1",), some[1].name: ("X2",) if extended else ()}.get(job.student, ())
            done(job, {"status": grading.GRADED, "report": report(*failed), "seconds": 1})

    monkeypatch.setattr(kill, "run_local", grade)
    heard = []
    settings = kill.Settings(DEFAULT_FILE.read_text(encoding="utf-8"), None, "en", 4, 300)
    outcomes = kill.kill(some, settings, 2, heard.append, known={})
    assert [(o.mutant.name, o.verdict, o.profile) for o in heard] == [
        (some[0].name, kill.KILLED, "core"),
        (some[1].name, kill.KILLED, "extended"),
        (some[2].name, kill.SURVIVED, "extended"),
    ]
    assert [(o.verdict, o.failed) for o in outcomes] == [
        (kill.KILLED, ["S2.1"]),
        (kill.KILLED, ["X2"]),
        (kill.SURVIVED, []),
    ]


def test_a_journal_gives_back_what_the_same_suite_judged_and_nothing_else(mutants, tmp_path):
    path = tmp_path / "journal.jsonl"
    same = {"suite": "a", "source": "b", "configuration": "c"}
    kill.Journal(path, same).add(kill.Outcome(mutants[0], kill.KILLED, ["S2.1"], 12.5, profile="core"))
    with open(str(path), "a") as handle:
        handle.write('{"identity": {"suite": "a"')  # a line cut short: the run was killed while writing
    again = kill.Journal(path, same)
    assert again.get("core", mutants[0])["failed"] == ["S2.1"]
    assert again.get("extended", mutants[0]) is None and again.get("core", mutants[1]) is None
    assert kill.Journal(path, dict(same, suite="changed")).get("core", mutants[0]) is None


def test_every_reviewed_equivalent_names_a_mutant_the_reference_still_has(mutants):
    keys = {mutant.key for mutant in mutants}
    stale = sorted(set(kill.equivalents()) - keys)
    assert not stale, "equivalent.toml names mutants that no longer exist (review it): %s" % stale


@pytest.mark.mutation
@pytest.mark.slow(90)
def test_a_mutant_whose_cleanup_sends_sigterm_where_sigkill_is_due_is_killed_by_s6_4(mutants):
    # After passing SIGTERM on, the reference kills what is left of the group with SIGKILL; with
    # SIGTERM there, a grandchild that ignores TERM outlives the runner.
    wrong = [m for m in mutants if m.key.startswith("lab/ReplaceLabConstant | signal_group(pgid, signal.SIGKILL) |")]
    assert len(wrong) == 1, [m.key for m in wrong]
    settings = kill.Settings(DEFAULT_FILE.read_text(encoding="utf-8"), None, "en", 4, 300)
    outcomes = kill.kill(wrong, settings, 1, known={})
    assert [(outcome.verdict, outcome.failed, outcome.profile) for outcome in outcomes] == [
        (kill.KILLED, ["S6.4"], "core")
    ], outcomes


def bench_module():
    """bench/mutation.py, a script, loaded as a module (with its folder's shared parts, as a
    script finds them)."""
    if str(BENCH.parent) not in sys.path:
        sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("mutation_bench", str(BENCH))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_again_grades_only_what_the_earlier_run_left_open(mutants, tmp_path):
    known = kill.equivalents()
    unlisted = [mutant.key for mutant in mutants if mutant.key not in known][:3]
    listed = sorted(known)[0]
    matrix = tmp_path / "full.json"
    verdicts = [kill.KILLED, kill.SURVIVED, kill.TIMEOUT]
    entries = [{"key": key, "verdict": verdict} for key, verdict in zip(unlisted, verdicts)]
    matrix.write_text(json.dumps({"mutants": entries + [{"key": listed, "verdict": kill.SURVIVED}]}))
    assert bench_module().open_findings(matrix) == set(unlisted[1:])


@pytest.mark.parametrize("content", [None, "not json", '{"mutants": [{"verdict": "survived"}]}', "[]"])
def test_again_with_a_file_that_is_not_a_kill_matrix_is_refused_in_one_line(content, tmp_path):
    matrix = tmp_path / "full.json"
    if content is not None:
        matrix.write_text(content)
    done = subprocess.run(
        [sys.executable, str(BENCH), "--again", str(matrix)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("mutation: --again ") and done.stderr.count("\n") == 1, done.stderr
