"""S4: `apply NAME` calls apply.sh once, and marks NAME applied only after apply.sh succeeded."""

import pytest

from conformance.judging import expect
from conformance.judging.scenarios import (
    APPLY_NAMES,
    FAILING,
    applied_once,
    applied_twice,
    apply_in_progress,
    called_once,
    every_apply,
    failed_then_fixed,
    own_runs_of_apply_sh,
)
from conformance.lab import draws
from conformance.lab.commands import APPLY

clause = pytest.mark.clause
NAMES = APPLY_NAMES


def marker_present(runner):
    """`apply feature` with state/feature.done there already, observed once for S4.1's checks."""

    def play():
        runner.put_marker("feature")
        return runner.run("apply", "feature")

    return runner.scenario("marker present", play)


@clause("S4.1")
def test_s4_1_marker_present_means_already_applied(runner):
    result = marker_present(runner)
    expect.exit_code(result, 0, "S4.1")
    expect.stdout_has(result, "already applied", "S4.1")


@clause("S4.1")
def test_s4_1_marker_present_means_apply_sh_not_called(runner):
    result = marker_present(runner)
    expect.finished(result, "S4.1")
    expect.apply_sh_not_called(result, "S4.1")


@clause("S4.1")
def test_s4_1_second_apply_is_a_no_op(runner):
    seen = applied_twice(runner)
    first, second = seen.first, seen.again
    applied_once(first, "feature")  # no first apply, no second one to judge: S4.2's defect
    expect.marked(first, "feature")  # what makes the second apply a no-op
    expect.exit_code(second, 0, "S4.1")
    expect.stdout_has(second, "already applied", "S4.1")
    expect.that(
        second.applied() == ["feature"],
        "S4.1",
        expect.say("apply.sh called once over two applies", "2 回の apply で apply.sh が 1 回だけ呼ばれる"),
        expect.shown_applied(second),
        second,
    )


@clause("S4.1")
def test_s4_1_already_applied_goes_to_stdout_not_stderr(runner):
    result = marker_present(runner)
    expect.finished(result, "S4.1")
    expect.stdout_has(result, "already applied", "S4.1")


@clause("S4.2")
@pytest.mark.parametrize("kind", NAMES)
def test_s4_2_apply_calls_apply_sh_with_the_name(runner, kind):
    name = draws.CURRENT.name(kind)
    applied_once(runner.observe("apply", name), name)


@clause("S4.2")
def test_s4_2_another_name_s_marker_does_not_count(runner):
    runner.put_marker("other")
    result = runner.run("apply", "feature")
    expect.exit_code(result, 0, "S4.2")
    expect.that(
        result.applied() == ["feature"],
        "S4.2",
        expect.say("apply.sh called for 'feature'", "apply.sh が 'feature' について呼ばれる"),
        expect.shown_applied(result),
        result,
    )


@clause("S4.3")
@pytest.mark.parametrize("kind", NAMES)
def test_s4_3_marker_created_after_success(runner, kind):
    name = draws.CURRENT.name(kind)
    result = runner.observe("apply", name)
    applied_once(result, name)  # no apply.sh, no success to mark: that is S4.2's defect
    expect.marked(result, name)


def applying(runner):
    """The apply in progress (see scenarios.py), once apply.sh was seen started."""
    seen = apply_in_progress(runner)
    if not seen.applying:
        expect.fail(
            "S4.2",
            expect.say("apply.sh started (applied.log written)", "apply.sh が始まる(applied.log に書かれる)"),
            seen.why_not_seen,
            seen.first,
        )
    return seen


@clause("S4.2")
def test_s4_2_apply_sh_itself_runs_under_the_runner(runner):
    # Its traces (a line in applied.log, its words on stdout) can be imitated; a shell running the
    # fixture's apply.sh under the runner, seen while it takes its four seconds, cannot.
    seen = applying(runner)
    expect.that(
        seen.apply_sh_seen,
        "S4.2",
        expect.say("`%s first` running under the runner while it applies", "適用中に runner の下で `%s first` が動く")
        % APPLY,
        expect.say(
            "applied.log was written, but no process of the runner ran apply.sh",
            "applied.log は書かれましたが、runner のどのプロセスも apply.sh を実行していませんでした",
        ),
        seen.first,
    )


@clause("S4.3")
def test_s4_3_no_marker_before_apply_sh_starts_in_any_apply(runner):
    # Seen by the kernel as each apply.sh started (see witness.py), in every apply of the grading:
    # a runner that marks first and applies after, except where it is watched longer, is seen.
    for result in every_apply(runner):
        for run in own_runs_of_apply_sh(result):
            expect.that(
                not run.marked,
                "S4.3",
                expect.say("no marker before `apply.sh %s` has run", "`apply.sh %s` の実行前にマーカーがない")
                % " ".join(run.argv[2:]),
                expect.say(
                    "state/%s.done existed when apply.sh started", "apply.sh の開始時に state/%s.done がありました"
                )
                % " ".join(run.argv[2:3]),
                result,
            )


@clause("S4.3")
def test_s4_3_no_marker_while_apply_sh_is_still_running(runner):
    seen = applying(runner)
    expect.that(
        not seen.marker_early,
        "S4.3",
        expect.say("no marker while apply.sh has not yet exited", "apply.sh が終了するまでマーカーがない"),
        expect.say(
            "state/first.done existed while apply.sh was still running",
            "apply.sh がまだ動いている間に state/first.done がありました",
        ),
        seen.first,
    )
    expect.exit_code(seen.first, 0, "S4.3")
    expect.that(
        seen.first.marked("first"),
        "S4.3",
        expect.say("the marker once apply.sh exited 0", "apply.sh が 0 で終了したあとにマーカーがある"),
        expect.say("no marker", "マーカーはありませんでした"),
        seen.first,
    )


@clause("S4.4")
def test_s4_4_failure_exits_1(runner):
    result = failed_then_fixed(runner).failed
    expect.exit_code(result, 1, "S4.4")


@clause("S4.4")
def test_s4_4_failure_exits_1_whatever_apply_sh_exited_with(runner):
    result = runner.run("apply", "broken", env={"APPLY_FAIL": "1", "APPLY_FAIL_CODE": "7"})
    expect.exit_code(result, 1, "S4.4")


@clause("S4.4")
def test_s4_4_failure_leaves_no_marker(runner):
    result = failed_then_fixed(runner).failed
    expect.finished(result, "S4.4")
    expect.no_marker(result, "S4.4")


@clause("S4.4")
def test_s4_4_a_failed_name_is_tried_again_next_time(runner):
    seen = failed_then_fixed(runner)
    failed, fixed = seen.failed, seen.fixed
    called_once(failed, "broken")  # no failed call of apply.sh, nothing to try again: S4.2's defect
    expect.exit_code(failed, 1, "S4.4")
    expect.exit_code(fixed, 0, "S4.4")
    expect.that(
        fixed.applied() == ["broken", "broken"],
        "S4.4",
        expect.say("apply.sh called again after the failure", "失敗のあと apply.sh がもう一度呼ばれる"),
        expect.shown_applied(fixed),
        fixed,
    )
    expect.that(
        fixed.marked("broken"),
        "S4.3",
        expect.say("marker after the successful retry", "成功した再試行のあとにマーカーがある"),
        expect.say("no marker", "マーカーはありませんでした"),
        fixed,
    )


@clause("S4.4")
def test_s4_4_failure_does_not_touch_other_markers(runner):
    runner.put_marker("earlier")
    result = runner.run("apply", "broken", env=FAILING)
    expect.exit_code(result, 1, "S4.4")
    expect.that(
        result.markers() == ["earlier.done"],
        "S4.4",
        expect.say("only the earlier marker", "前からあったマーカーだけ"),
        expect.shown_markers(result.markers()),
        result,
    )
