"""S5: apply holds flock(LOCK_EX | LOCK_NB) on state/lock; a second run gets exit 3 at once."""

import pytest

from conformance.judging import expect
from conformance.judging.scenarios import (
    applied_twice,
    apply_in_progress,
    every_apply,
    failed_then_fixed,
    lock_clause,
    own_runs_of_apply_sh,
)
from conformance.lab import timing

clause = pytest.mark.clause
LOCKED = expect.LOCKED
HOLDERS = pytest.mark.parametrize("shared", [False, True], ids=["exclusive-holder", "shared-holder"])


def refused(runner, shared=False):
    """`apply feature` while another process holds state/lock, observed once per kind of holder."""

    def play():
        runner.hold_lock(shared=shared)
        return runner.run("apply", "feature")

    return runner.scenario(("lock held", shared), play)


def applying(runner):
    """The apply in progress (see scenarios.py), once apply.sh was seen running."""
    seen = apply_in_progress(runner)
    if not seen.applying:
        expect.fail(
            "S4.2",
            expect.say("apply.sh started by the first runner", "最初の runner が apply.sh を開始する"),
            seen.why_not_seen,
            seen.first,
        )
    return seen


@clause("S5.2")
@HOLDERS
def test_s5_2_held_lock_exits_3(runner, shared):
    result = refused(runner, shared)
    expect.refused_by_lock(result, shared, lock_clause(runner, result, "S5.2"))


@clause("S5.2")
@HOLDERS
def test_s5_2_held_lock_changes_nothing(runner, shared):
    result = refused(runner, shared)
    expect.finished(result, "S5.2")
    expect.apply_sh_not_called(result, lock_clause(runner, result, "S5.2"))
    expect.no_marker(result, lock_clause(runner, result, "S5.2"))


@clause("S5.2")
def test_s5_2_held_lock_message_is_not_on_stdout(runner):
    result = refused(runner)
    expect.finished(result, "S5.2")
    expect.that(
        LOCKED not in result.out,
        "S5.2",
        expect.say("the message on stderr only", "メッセージは標準エラー出力にだけ書かれる"),
        expect.say("stdout %r", "標準出力 %r") % result.out,
        result,
    )


@clause("S5.2")
@pytest.mark.parametrize("second", ["other_name", "same_name"], ids=["other-name", "same-name"])
def test_s5_2_second_runner_while_the_first_applies(runner, second):
    seen = applying(runner)
    # The first runner's own lock is the one held: a shared one lets a second runner of the same
    # kind through, which the hint says. None held at all (S5.1's defect) lets any through.
    charged = "S5.1" if seen.lock_free else "S5.2"
    # The first runner let go of its lock as it ended: a runner still running then may have waited for it.
    expect.refused_by_lock(
        getattr(seen, second), bool(seen.shared_only), charged, others_applied=["first"], let_go=seen.first.ended
    )
    expect.exit_code(seen.first, 0, "S5.1")
    expect.that(
        seen.first.applied() == ["first"],
        charged,
        expect.say("apply.sh called by the first runner only", "apply.sh を呼ぶのは最初の runner だけ"),
        expect.shown_applied(seen.first),
        getattr(seen, second),
    )


@clause("S5.2")
def test_s5_2_refusal_is_quick_not_a_wait(runner):
    result = refused(runner)
    expect.refused_by_lock(result, False, lock_clause(runner, result, "S5.2"))
    expect.took_between(
        result,
        0,
        timing.OVERHEAD_S,
        "S5.2",
        expect.say("an immediate refusal (LOCK_NB), not a wait", "待たずにすぐ拒否する(LOCK_NB)"),
    )


@clause("S5.2")
def test_s5_2_marker_present_and_lock_held(runner):
    # Settled: `already applied` with 0 and a refusal with 3 both conform.
    runner.put_marker("feature")
    runner.hold_lock()
    result = runner.run("apply", "feature")
    expect.exit_code_in(result, (0, 3), "S5.2")
    expect.apply_sh_not_called(result, "S5.2")


@clause("S5.1")
@pytest.mark.slow(4)
def test_s5_1_lock_held_while_apply_sh_runs(runner):
    seen = applying(runner)
    expect.that(
        not seen.lock_free,
        "S5.1",
        expect.say(
            "state/lock locked (LOCK_EX) while apply.sh runs",
            "apply.sh の実行中、state/lock がロックされている(LOCK_EX)",
        ),
        expect.say(
            "another process could take LOCK_EX on state/lock meanwhile",
            "その間に別のプロセスが state/lock に LOCK_EX を取れました",
        ),
        seen.first,
    )
    expect.exit_code(seen.first, 0, "S5.1")


@clause("S5.1")
def test_s5_1_lock_held_as_apply_sh_starts_in_every_apply(runner):
    # Seen by the kernel as each apply.sh started (see witness.py), in every apply of the grading:
    # a runner that holds the lock only while apply.sh is slow, or takes it and lets go before
    # apply.sh runs, is seen.
    for result in every_apply(runner):
        for run in own_runs_of_apply_sh(result):
            expect.that(
                run.lock_held,
                "S5.1",
                expect.say(
                    "state/lock locked (flock) as `apply.sh %s` starts",
                    "`apply.sh %s` の開始時に state/lock がロックされている(flock)",
                )
                % " ".join(run.argv[2:]),
                expect.say(
                    "apply.sh started while no process held an flock on state/lock",
                    "どのプロセスも state/lock の flock を持たないまま apply.sh が始まりました",
                ),
                result,
            )


@clause("S5.1")
def test_s5_1_lock_file_is_state_lock(runner):
    seen = applied_twice(runner)
    expect.exit_code(seen.first, 0, "S5.1")
    expect.that(
        seen.lock_file,
        "S5.1",
        expect.say("the lock file /root/pyops/sub/state/lock", "ロックファイル /root/pyops/sub/state/lock がある"),
        expect.say("no state/lock after an apply", "apply のあとに state/lock がありませんでした"),
        seen.first,
    )


@clause("S5.1")
@pytest.mark.parametrize("failed", [False, True], ids=["after-success", "after-failure"])
def test_s5_1_lock_released_after_exit(runner, failed):
    # The first apply's lab, tried by the harness once it ended; then the next apply there.
    if failed:
        seen = failed_then_fixed(runner)
        first, lock_free, again = seen.failed, seen.lock_free, seen.fixed
    else:
        seen = applied_twice(runner)
        first, lock_free, again = seen.first, seen.lock_free, seen.next_name
    expect.finished(first, "S5.1")
    expect.that(
        lock_free,
        "S5.1",
        expect.say("state/lock free once the runner has exited", "runner の終了後は state/lock が解放されている"),
        expect.say(
            "still locked: a process the runner left holds it",
            "まだロックされていました。runner が残したプロセスがロックを保持していました",
        ),
        first,
    )
    expect.exit_code(again, 0, "S5.1")
