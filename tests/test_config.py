"""The lab configuration: points per step and clause, profile, language, visibility."""

import pytest

from conformance.lab import config
from conformance.reporting import platforms


def test_the_shipped_configuration_gives_one_point_per_clause_of_the_core_profile():
    lab = config.load()
    assert lab.profile == "core" and lab.lang is None
    assert lab.step_points == {"S1": 3, "S2": 4, "S3": 5, "S4": 4, "S5": 2, "S6": 4, "S7": 3, "S8": 3, "X": 0}


def _tests_of(*clauses):
    return [{"id": "t%d" % n, "clause": clause, "outcome": "passed"} for n, clause in enumerate(clauses)]


def test_a_step_s_points_are_shared_by_its_clauses():
    lab = config.parse({"points": {"S2": 4}})
    # Shown to 4 decimals, the first in the lab's order takes the unit left over: they add up to 4.
    assert lab.worth(["S2.4", "S2.1", "S2.3", "S1.1"]) == {"S2.1": 1.3334, "S2.3": 1.3333, "S2.4": 1.3333, "S1.1": 0}
    assert lab.worth(["S2.1", "S2.2", "S2.3", "S2.4"]) == {"S2.1": 1, "S2.2": 1, "S2.3": 1, "S2.4": 1}


def test_a_clause_with_points_of_its_own_takes_them_out_of_its_step():
    lab = config.parse({"points": {"S2": 4, "clause": {"S2.4": 2}}})
    worth = lab.worth(["S2.1", "S2.3", "S2.4"])
    assert worth == {"S2.1": 1, "S2.3": 1, "S2.4": 2}


def _data(tests):
    return {"tests": tests, "profile": "core", "isolation": "namespace", "summary": {}}


def test_the_score_is_the_points_of_the_clauses_passed():
    tests = _tests_of("S1.1", "S1.2", "S2.3", "S2.4", "S2.4")
    tests[1]["outcome"] = tests[3]["outcome"] = "failed"
    # S2.4 has one check passed and one failed: the clause is failed, and earns nothing.
    assert platforms.score(_data(tests), config.parse({"points": {"S1": 10, "S2": 30}})) == {
        "points": 20,
        "max_points": 40,
    }


def test_the_score_does_not_depend_on_the_order_checks_finished_in():
    # 3 points over the 14 clauses of X cannot be shared evenly: which clauses get the extra unit
    # must not depend on which check finished first, or one runner scores differently each run.
    lab = config.parse({"profile": "extended", "points": {"X": 3}})
    tests = _tests_of(*["X%d" % n for n in range(1, 15)])
    tests[0]["outcome"] = "failed"
    scores = set()
    for turn in range(len(tests)):
        scores.add(platforms.score(_data(tests[turn:] + tests[:turn]), lab)["points"])
    assert scores == {3 - 0.2143}, scores


def test_points_that_do_not_divide_evenly_add_up_exactly():
    lab = config.parse({"points": {"S1": 1, "S2": 1, "S3": 1}})
    tests = _tests_of("S1.1", "S1.2", "S1.3", "S2.1", "S2.2", "S2.3", "S2.4", "S3.1", "S3.2", "S3.3")
    assert platforms.score(_data(tests), lab) == {"points": 3, "max_points": 3}
    shown = platforms.gradescope(dict(_data(tests), summary={"passed": 10, "total": 10}), lab)
    assert sum(test["max_score"] * 10_000 for test in shown["tests"]) == 30_000


def test_visibility_per_step_reaches_gradescope():
    lab = config.parse({"visibility": {"default": "after_published", "S6": "hidden"}})
    tests = _tests_of("S6.4", "S1.1")
    data = dict(_data(tests), summary={"passed": 2, "total": 2})
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


def test_differences_name_each_setting_a_course_changed_in_the_lab_s_order():
    from conformance.lab.config import DEFAULT_FILE, differences, loads

    old = loads(DEFAULT_FILE.read_text(encoding="utf-8"))
    text = DEFAULT_FILE.read_text(encoding="utf-8").replace("S3 = 5", "S3 = 10").replace("S1 = 3", "S1 = 6")
    text = text.replace('default = "visible"', 'default = "visible"\nS6 = "hidden"') + '\n[points.clause]\n"S2.4" = 2\n'
    assert differences(old, loads(text)) == [
        "points of step S1: 3 -> 6",
        "points of step S3: 5 -> 10",
        "points of clause S2.4: - -> 2",
        "visibility of step S6: - -> hidden",
    ]
    assert differences(old, old) == []
