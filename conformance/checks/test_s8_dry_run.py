"""S8: `apply --dry-run NAME` says what it would do, changes nothing, exits 0."""

import pytest

from conformance.judging import expect, scenarios
from conformance.judging.scenarios import applied_twice

clause = pytest.mark.clause


def dry_run(runner, name="feature", marked=False):
    """`apply --dry-run NAME`, with or without state/NAME.done, observed once for S8's checks."""
    if name == "feature" and not marked:
        return dry_run_then_apply(runner)[0]

    def play():
        if marked:
            runner.put_marker(name)
        return runner.run("apply", "--dry-run", name)

    return runner.scenario(("dry run", name, marked), play)


def dry_run_then_apply(runner):
    """`apply --dry-run feature` in a fresh lab, then `apply feature` there: the dry run without
    a marker that S8's checks judge, and the real apply that S8.1 wants to still run after it."""

    def play():
        dry = runner.run("apply", "--dry-run", "feature").kept_apart()  # as its own call left the lab
        return dry, runner.run("apply", "feature")

    return runner.scenario("dry run then apply", play)


@clause("S8.1")
@pytest.mark.parametrize("marked", [False, True], ids=["without-marker", "with-marker"])
def test_s8_1_apply_sh_is_not_called(runner, marked):
    result = dry_run(runner, marked=marked)
    expect.finished(result, "S8.1")
    expect.apply_sh_not_called(result, "S8.1")


@clause("S8.1")
def test_s8_1_no_marker_is_created(runner):
    result = dry_run(runner)
    expect.finished(result, "S8.1")
    expect.no_marker(result, "S8.1")


@clause("S8.1")
def test_s8_1_a_real_apply_still_runs_afterwards(runner):
    dry, result = dry_run_then_apply(runner)
    expect.finished(dry, "S8.1")
    expect.exit_code(result, 0, "S8.1")
    expect.that(
        result.applied() == ["feature"],
        scenarios.apply_clause(runner, "S8.1") if result.applied() != ["feature"] else "S8.1",
        expect.say(
            "the real apply calls apply.sh (the dry run marked nothing)",
            "本番の apply が apply.sh を呼ぶ(ドライランは何もマーカーを作っていない)",
        ),
        expect.shown_applied(result),
        result,
    )


@clause("S8.1")
def test_s8_1_while_the_lock_is_held(runner):
    # Settled: the dry run may come before the lock (exit 0) or after it (exit 3).
    runner.hold_lock()
    result = runner.run("apply", "--dry-run", "feature")
    expect.not_waiting_for_the_lock(result, "S8.1")
    expect.exit_code_in(result, (0, 3), "S8.1")
    expect.that(
        result.applied() == [] and result.markers() == [],
        "S8.1",
        expect.say("nothing called or marked", "何も呼ばず、マーカーも作らない"),
        expect.say("applied.log %s, markers %s", "applied.log の内容は %s、マーカーは %s でした")
        % (result.applied(), result.markers()),
        result,
    )


@clause("S8.2")
@pytest.mark.parametrize("name", ["feature", "db-migration-42", "v2"])
def test_s8_2_names_the_name_and_exits_0(runner, name):
    result = dry_run(runner, name)
    expect.exit_code(result, 0, "S8.2")
    expect.stdout_has(result, name, "S8.2")


@clause("S8.2")
def test_s8_2_unapplied_name_is_not_called_applied(runner):
    result = dry_run(runner)
    expect.exit_code(result, 0, "S8.2")
    expect.that(
        "already applied" not in result.out,
        "S8.2",
        expect.say("a plan for an unapplied name", "未適用の名前に対する計画を書く"),
        expect.say(
            "it says 'already applied' although there is no marker: %r",
            "マーカーがないのに 'already applied' と書きました: %r",
        )
        % result.out,
        result,
    )


@clause("S8.3")
def test_s8_3_marked_name_is_already_applied(runner):
    result = dry_run(runner, marked=True)
    expect.exit_code(result, 0, "S8.3")
    expect.stdout_has(result, "already applied", "S8.3")


@clause("S8.3")
def test_s8_3_after_a_real_apply(runner):
    seen = applied_twice(runner)
    expect.exit_code(seen.first, 0, "S4.3")
    scenarios.called_once(seen.first, "feature")  # no first call of apply.sh to count from: S4.2's defect
    expect.marked(seen.first, "feature")  # what the dry run must find applied
    result = seen.dry_run
    expect.exit_code(result, 0, "S8.3")
    expect.stdout_has(result, "already applied", "S8.3")
    expect.that(
        result.applied() == ["feature"],
        "S8.1",
        expect.say("no second apply.sh call", "apply.sh の 2 回目の呼び出しがない"),
        expect.shown_applied(result),
        result,
    )
