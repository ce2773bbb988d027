"""Values a runner cannot predict (conformance/lab/draws.py): drawn per grading from a seed that the
report records, that --seed and lab.toml fix, and that replay uses again."""

import json
import re
import subprocess
import sys

import pytest

from conformance.lab import config, draws
from conformance.selftest import command
from tests.grading import REFERENCE, grade

PLAIN_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


@pytest.mark.parametrize("seed", range(200))
def test_every_seed_draws_values_a_correct_runner_can_meet_in_a_grading_s_time(seed):
    drawn = draws.draw(seed)
    assert drawn == draws.draw(seed)  # the same on every machine: a replay plays the same scenarios
    # A command that ends after the two seconds a runner that ignores --timeout would kill at, and
    # a second and a half before the timeout it must survive.
    assert 2 < drawn.survived_command_s <= drawn.survived_timeout_s - 1.5
    assert drawn.survived_timeout_s in (4, 5) and drawn.kill_timeout_s in (3, 4) and drawn.last_backoff_s in (2, 3)
    assert set(drawn.names) == set(draws.NAME_KINDS) and drawn.name("help") == "help"
    assert all(PLAIN_NAME.match(name) for name in drawn.names.values()), drawn.names
    assert len(set(drawn.names.values())) == len(drawn.names)


def test_seeds_draw_different_values():
    assert len({(d.survived_timeout_s, d.kill_timeout_s, d.last_backoff_s) for d in map(draws.draw, range(50))}) == 8
    assert len({draws.draw(seed).name("db-migration") for seed in range(50)}) > 20


@pytest.mark.parametrize("text", ["seed = -1", "seed = 2147483648", 'seed = "7"', "seed = 1.5", "seed = true"])
def test_a_seed_lab_toml_cannot_use_is_refused_in_one_line(text):
    with pytest.raises(config.ConfigError) as refused:
        config.loads(text)
    assert "seed" in str(refused.value) and "\n" not in str(refused.value)


def test_lab_toml_fixes_the_seed_and_a_change_of_it_is_a_change_of_the_grading():
    assert config.loads("seed = 7").seed == 7 and config.loads("").seed is None
    assert config.differences(config.loads("seed = 7"), config.loads("seed = 8")) == ["seed: 7 -> 8"]


@pytest.mark.parametrize("seed", ["-1", "x", "2147483648"])
def test_a_seed_the_cli_cannot_use_is_refused_in_one_line(seed):
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "--reference", "--seed", seed], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--seed" in done.stderr, done.stderr


@pytest.mark.once
def test_a_grading_draws_a_seed_records_it_and_uses_a_given_one(tmp_path):
    folders = [tmp_path / str(n) for n in range(2)]
    for folder in folders + [tmp_path / "given"]:
        folder.mkdir()
    drawn = [grade(folder, REFERENCE, "--clause", "S2.1").report for folder in folders]
    assert all(report["provenance"]["seed"] == report["seed"] for report in drawn)
    assert drawn[0]["seed"] != drawn[1]["seed"]
    given = grade(tmp_path / "given", REFERENCE, "--clause", "S2.1", "--seed", "7")
    assert given.rc == 0 and given.report["seed"] == 7 == given.report["provenance"]["seed"], given.explain()
    assert given.report["summary"]["failed"] == 0, given.explain()


@pytest.mark.once
def test_a_replay_uses_the_recorded_seed(tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    runner = folder / "runner.py"
    runner.write_bytes(REFERENCE.read_bytes())
    graded = grade(folder, runner, "--clause", "S3.2", "--seed", "12345")
    (folder / "results.json").write_text(json.dumps(graded.report))
    replayed = subprocess.run(
        [sys.executable, "-m", "conformance", "replay", str(folder / "results.json")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "replayed with the recorded seed 12345" in replayed.stdout, replayed.stdout


def test_the_selftest_says_under_how_many_seeds_each_correct_runner_passed():
    reports = [{"seed": seed, "clauses": {}, "tests": []} for seed in (11, 12, 13, 14, 15)]
    entry = command.Graded("correct", "runner", reports=reports)
    line = command.summarize([entry], None, 29, 1.0, rounds=5)["lines"][0]
    assert line == "correct runners: 1 of 1 pass, with the same verdicts in 5 rounds, under at least 5 seeds each"
