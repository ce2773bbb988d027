"""The lab configuration: points per step and clause, profile, language, visibility."""

import pytest

from conformance import config, platforms


def test_the_shipped_configuration_gives_one_point_per_clause_of_the_core_profile():
    lab = config.load()
    assert lab.profile == "core" and lab.lang is None
    assert lab.step_points == {"S1": 3, "S2": 4, "S3": 5, "S4": 4, "S5": 2, "S6": 4, "S7": 3, "S8": 3, "X": 0}


def _tests_of(*clauses):
    return [{"id": "t%d" % n, "clause": clause, "outcome": "passed"} for n, clause in enumerate(clauses)]


def test_a_step_s_points_are_shared_by_its_checks():
    lab = config.parse({"points": {"S2": 4}})
    worth = lab.points(_tests_of("S2.1", "S2.1", "S2.3", "S2.4", "S1.1"))
    assert worth == {"t0": 1, "t1": 1, "t2": 1, "t3": 1, "t4": 0}


def test_a_clause_with_points_of_its_own_takes_them_out_of_its_step():
    lab = config.parse({"points": {"S2": 4, "clause": {"S2.4": 2}}})
    worth = lab.points(_tests_of("S2.1", "S2.3", "S2.4", "S2.4"))
    assert worth == {"t0": 1, "t1": 1, "t2": 1, "t3": 1}
    assert sum(worth.values()) == 4


def test_the_score_does_not_depend_on_the_order_checks_finished_in():
    # 3 points over 7 checks cannot be shared evenly: which checks get the extra unit must not
    # depend on which finished first, or a runner failing one of them scores differently each run.
    tests = _tests_of(*["S1.1"] * 7)
    tests[0]["outcome"] = "failed"
    lab = config.parse({"points": {"S1": 3}})
    scores = set()
    for turn in range(len(tests)):
        shuffled = tests[turn:] + tests[:turn]
        data = {"tests": shuffled, "profile": "core", "isolation": "namespace", "summary": {}}
        scores.add(platforms.score(data, lab)["points"])
    assert len(scores) == 1, scores


def test_the_score_is_the_points_of_the_checks_passed():
    tests = _tests_of("S1.1", "S1.2", "S2.3", "S2.4")
    tests[1]["outcome"] = tests[3]["outcome"] = "failed"
    data = {"tests": tests, "profile": "core", "isolation": "namespace", "summary": {}}
    assert platforms.score(data, config.parse({"points": {"S1": 10, "S2": 30}})) == {"points": 20, "max_points": 40}


def test_visibility_per_step_reaches_gradescope():
    lab = config.parse({"visibility": {"default": "after_published", "S6": "hidden"}})
    tests = _tests_of("S6.4", "S1.1")
    data = {"tests": tests, "profile": "core", "isolation": "namespace", "summary": {"passed": 2, "total": 2}}
    shown = {t["number"]: (t["visibility"], t["tags"]) for t in platforms.gradescope(data, lab)["tests"]}
    assert shown == {"S6.4": ("hidden", ["S6.4"]), "S1.1": ("after_published", ["S1.1"])}


@pytest.mark.parametrize(
    "data,says",
    [
        ({"profile": "full"}, "profile = 'full'"),
        ({"lang": "fr"}, "lang = 'fr'"),
        ({"points": {"S9": 1}}, "points.S9: no such step"),
        ({"points": {"S1": -1}}, "points.S1 = -1"),
        ({"points": {"S1": True}}, "points.S1 = True"),
        ({"points": {"S2": 1, "clause": {"S2.4": 2}}}, "more than the step's 1"),
        ({"points": {"clause": {"S2.9": 1}}}, 'points.clause."S2.9": no such clause'),
        ({"visibility": {"S1": "secret"}}, "visibility.S1 = 'secret'"),
        ({"visibility": {"S10": "hidden"}}, "visibility.S10: no such step"),
        ({"weights": {}}, "unknown setting weights"),
    ],
)
def test_a_wrong_setting_is_named_in_one_line(data, says):
    with pytest.raises(config.ConfigError) as raised:
        config.parse(data, "lab.toml")
    message = str(raised.value)
    assert message.startswith("lab.toml: ") and says in message and "\n" not in message


def test_a_file_that_is_not_toml_is_named(tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text("points = [\n")
    with pytest.raises(config.ConfigError, match="not valid TOML"):
        config.load(path)
