"""X1-X14: what a careful runner also does (the extended profile)."""

import os
import signal
import time

import pytest

from conformance.harness import labfiles
from conformance.judging import expect
from conformance.judging.scenarios import calls
from conformance.lab import timing
from conformance.lab.commands import APPLY, HANG, counted, py, sh

clause = pytest.mark.clause
slow = pytest.mark.slow
EXIT_143 = (143, -signal.SIGTERM)


@clause("X1")
@pytest.mark.parametrize(
    "signum",
    [signal.SIGKILL, signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP, signal.SIGINT],
    ids=lambda s: signal.Signals(s).name,
)
def test_x1_killed_by_signal_n_gives_128_plus_n(runner, signum):
    result = runner.run("run", "--", *py("import os; os.kill(os.getpid(), %d)" % signum))
    expect.exit_code(result, 128 + signum, "X1")


@clause("X2")
def test_x2_missing_command_gives_127(runner):
    result = runner.run("run", "--", "/no/such/command")
    expect.exit_code(result, 127, "X2")


@clause("X2")
def test_x2_missing_command_on_path_gives_127(runner):
    result = runner.run("run", "--", "no-such-command-pyops")
    expect.exit_code(result, 127, "X2")


@clause("X2")
@pytest.mark.parametrize("kind", ["not-executable", "directory"])
def test_x2_non_executable_gives_126(runner, kind):
    target = runner.lab.work / kind
    if kind == "directory":
        target.mkdir()
    else:
        target.write_text("#!/bin/sh\necho should not run\n")
        os.chmod(str(target), 0o644)
    result = runner.run("run", "--", str(target))
    expect.exit_code(result, 126, "X2")


@clause("X2")
@pytest.mark.parametrize("command", [["/no/such/command"], ["/etc"]], ids=["missing", "directory"])
def test_x2_one_line_and_no_traceback(runner, command):
    result = runner.run("run", "--", *command)
    expect.finished(result, "X2")
    expect.that(
        "Traceback" not in result.err,
        "X2",
        expect.say("a one-line message, no traceback", "1 行のメッセージで、トレースバックがない"),
        expect.say("a traceback on stderr", "標準エラー出力にトレースバックが出ていました"),
        result,
    )
    expect.that(
        len(result.err.strip().splitlines()) == 1,
        "X2",
        expect.say("exactly one line on stderr", "標準エラー出力にちょうど 1 行出る"),
        expect.say("%d lines", "%d 行出ていました") % len(result.err.strip().splitlines()),
        result,
    )


@clause("X3")
@slow(3)
def test_x3_sigterm_during_backoff_ends_at_once(runner):
    counter = runner.lab.counter
    invocation = runner.start("run", "--retries", "2", "--backoff", "5", "--", *counted(counter), expect_s=1)
    # The first attempt is over once it is recorded (its line in the counter, no command left).
    invocation.wait_until(
        lambda: calls(runner.lab, "X3") and not invocation.descendants(),
        expect.say("the first attempt over", "最初の試行が終わる"),
        "S3.1",
    )
    time.sleep(0.2)  # well inside the 5s backoff
    sent = invocation.send_signal(signal.SIGTERM)
    result = invocation.finish()
    expect.exit_code_in(result, EXIT_143, "X3")
    waited = result.ended - sent
    expect.that(
        waited <= 1.0 * timing.SCALE,
        "X3",
        expect.say("exit within a second of SIGTERM", "SIGTERM から 1 秒以内に終了する"),
        expect.say("exit %.2fs after SIGTERM", "SIGTERM の %.2f 秒後に終了しました") % waited,
        result,
    )
    expect.that(
        len(calls(result, "X3")) == 1,
        "X3",
        expect.say("no attempt after SIGTERM", "SIGTERM のあとは試行しない"),
        expect.say("%d attempts", "試行は %d 回でした") % len(calls(result, "X3")),
        result,
    )


@clause("X4")
@pytest.mark.parametrize(
    "data",
    [bytes(range(256)), b"no trailing newline", b"\r\n\r\n", b"\x00\xff\xfe"],
    ids=["all-bytes", "no-newline", "crlf", "nul-and-invalid-utf8"],
)
def test_x4_stdout_byte_for_byte(runner, data):
    result = runner.run("run", "--", *py("import sys; sys.stdout.buffer.write(%r)" % data))
    expect.exit_code(result, 0, "X4")
    expect.stdout_is(result, data, "X4")


@clause("X4")
def test_x4_a_few_megabytes(runner):
    size = 3 * 1024 * 1024
    code = "import sys\nfor i in range(%d):\n    sys.stdout.buffer.write(bytes([i %% 251]) * 1024)" % (size // 1024)
    result = runner.run("run", "--", *py(code))
    expect.exit_code(result, 0, "X4")
    wanted = b"".join(bytes([i % 251]) * 1024 for i in range(size // 1024))
    expect.that(
        result.stdout == wanted,
        "X4",
        expect.say("%d bytes exactly as printed", "コマンドが出力した %d バイトがそのまま出る") % size,
        expect.say("%d bytes, %s", "%d バイトで、%s")
        % (
            len(result.stdout),
            expect.say("different", "内容が違いました")
            if len(result.stdout) == size
            else expect.say("length differs", "長さが違いました"),
        ),
        result,
    )


@clause("X5")
@slow(3)
def test_x5_output_streams_while_the_command_runs(runner):
    go = runner.lab.work / "go"
    command = sh('echo first; while [ ! -e "%s" ]; do sleep 0.05; done; echo second' % go)
    invocation = runner.start("run", "--", *command, expect_s=timing.APPEAR_S)
    try:
        invocation.wait_until(
            lambda: b"first" in invocation.stdout_so_far(),
            expect.say(
                "'first' on the runner's stdout while the command still runs",
                "コマンドの実行中に runner の標準出力に 'first' が出る",
            ),
            "X5",
        )
    finally:
        go.touch()
    result = invocation.finish()
    expect.stdout_is(result, b"first\nsecond\n", "X5")


@clause("X6")
@slow(2)
def test_x6_fractional_timeout(runner):
    invocation = runner.start("run", "--timeout", "0.5", "--", HANG, expect_s=0.5)
    started = invocation.command_started([HANG], "X6")
    result = invocation.finish()
    expect.exit_code(result, 124, "X6")
    expect.killed_after(result, started, 0.5, "X6")
    expect.no_survivors(result, "S2.4")


@clause("X6")
@slow(2)
def test_x6_fractional_backoff(runner):
    counter = runner.lab.counter
    result = runner.run("run", "--retries", "2", "--backoff", "0.25", "--", *counted(counter), expect_s=1)
    expect.exit_code(result, 1, "X6")
    starts = calls(result, "X6")
    expect.count_is(result, expect.say("attempts", "試行回数"), len(starts), 3, "X6")
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    for gap, wanted in zip(gaps, (0.25, 0.5)):
        expect.within(
            gap,
            wanted - timing.EARLY_S,
            wanted + timing.REACTION_S,
            "X6",
            expect.say("waits of 0.25s then 0.5s", "0.25 秒、次に 0.5 秒待つ"),
            expect.say("gaps %s", "試行の間隔(秒)は %s でした") % ["%.2f" % g for g in gaps],
            result,
        )


@clause("X7")
def test_x7_missing_state_folder_is_created(runner):
    runner.lab.state.rmdir()
    result = runner.run("apply", "feature")
    expect.exit_code(result, 0, "X7")
    expect.that(
        result.marked("feature"),
        "X7",
        expect.say("state/ made and the marker in it", "state/ が作られ、その中にマーカーができる"),
        expect.say("no marker", "マーカーがありませんでした"),
        result,
    )


@clause("X8")
@pytest.mark.parametrize("marked", [False, True], ids=["without-marker", "with-marker"])
def test_x8_dry_run_writes_nothing(runner, marked):
    if marked:
        runner.put_marker("feature")
    before = _tree(runner.lab.sub)
    result = runner.run("apply", "--dry-run", "feature")
    expect.exit_code(result, 0, "X8")
    after = _tree(runner.lab.sub)
    expect.that(
        before == after,
        "X8",
        expect.say("no file or folder created or changed", "ファイルもフォルダーも作られず、変更もされない"),
        expect.say("changed: %s", "変更がありました: %s") % sorted(set(before.items()) ^ set(after.items())),
        result,
    )


@clause("X8")
def test_x8_dry_run_does_not_create_state(runner):
    runner.lab.state.rmdir()
    result = runner.run("apply", "--dry-run", "feature")
    expect.exit_code(result, 0, "X8")
    expect.that(
        not labfiles.look(runner.lab.sub, "state").exists,
        "X8",
        expect.say("no state/ folder made by a dry run", "ドライランでは state/ フォルダーが作られない"),
        expect.say("state/ exists", "state/ が存在していました"),
        result,
    )


def _tree(root):
    """Every path below `root` with its size and time (labfiles: no link followed, any depth)."""
    return labfiles.tree(root)


@clause("X9")
def test_x9_ts_has_a_utc_offset(runner):
    result = runner.run("run", "--", "true")
    record = expect.records(result, 1, "X9")[0]
    ts = expect.field(result, record, "ts")
    expect.that(
        ts.utcoffset() is not None,
        "X9",
        expect.say("ts with an offset such as +00:00 or Z", "ts に +00:00 や Z のようなオフセットが付いている"),
        expect.say("ts %r", "ts は %r でした") % record.value["ts"],
        result,
    )


@clause("X10")
def test_x10_apply_sh_does_not_inherit_the_lock(runner):
    invocation = runner.start("apply", "slow", env={"APPLY_DELAY": "2"}, expect_s=2)
    apply_sh = invocation.wait_for_descendant(["bash", APPLY], "S4.2")
    fd, found = labfiles.open_file(runner.lab.sub, "state/lock")  # the runner's: no link followed
    if found.refused:
        raise labfiles.LabFileRefused(found.name, found.refused, "S5.1", result=invocation.finish())
    if fd is None:
        expect.fail(
            "S5.1",
            expect.say("state/lock while apply.sh runs", "apply.sh の実行中に state/lock がある"),
            expect.say("no state/lock", "state/lock がありませんでした"),
            invocation.finish(),
        )
    lock = os.fstat(fd)
    os.close(fd)
    holders = []
    for process in [apply_sh] + apply_sh.children(recursive=True):
        for fd in os.listdir("/proc/%d/fd" % process.pid):
            try:
                seen = os.stat("/proc/%d/fd/%s" % (process.pid, fd))
            except OSError:
                continue
            if (seen.st_dev, seen.st_ino) == (lock.st_dev, lock.st_ino):
                holders.append("pid %d fd %s" % (process.pid, fd))
    result = invocation.finish()
    expect.that(
        not holders,
        "X10",
        expect.say(
            "no descriptor of state/lock in apply.sh or its children",
            "apply.sh とその子プロセスが state/lock のファイルディスクリプターを持たない",
        ),
        expect.say("state/lock open in %s", "%s で state/lock が開かれていました") % ", ".join(holders),
        result,
    )


@clause("X11")
@pytest.mark.parametrize("name", ["../escape", "a/b", "..", ".", "ABSOLUTE", ""])
def test_x11_a_name_leaving_state_is_refused(runner, name):
    outside = runner.lab.work / "outside"
    name = str(outside) if name == "ABSOLUTE" else name  # a path of this test's own, never a shared one
    before = _tree(runner.lab.sub)
    result = runner.run("apply", name)
    expect.finished(result, "X11")
    expect.that(
        result.rc != 0,
        "X11",
        expect.say("a non-zero exit for NAME %r", "NAME %r では 0 以外の終了コードで終了する") % name,
        expect.say("exit code 0", "終了コード 0 で終了しました"),
        result,
    )
    after = _tree(runner.lab.sub)
    expect.that(
        before == after and result.applied() == [],
        "X11",
        expect.say("nothing written, apply.sh not called", "何も書かれず、apply.sh も呼ばれない"),
        expect.say("changed: %s", "変更がありました: %s") % sorted(set(before.items()) ^ set(after.items())),
        result,
    )
    expect.that(
        not labfiles.present(outside.parent, outside.name + ".done"),
        "X11",
        expect.say("no marker outside state/", "state/ の外にマーカーを作らない"),
        expect.say("%s.done was written", "%s.done が書かれていました") % outside,
        result,
    )


@clause("X12")
def test_x12_stderr_passes_through(runner):
    result = runner.run("run", "--", *sh("echo to-stderr >&2"))
    expect.exit_code(result, 0, "X12")
    expect.stderr_has(result, "to-stderr", "X12")


@clause("X13")
def test_x13_sigterm_while_apply_sh_runs(runner):
    invocation = runner.start("apply", "slow", env={"APPLY_DELAY": "5"}, expect_s=1)
    invocation.wait_until(
        lambda: labfiles.present(runner.lab.sub, "applied.log"),
        expect.say("apply.sh started", "apply.sh が始まる"),
        "S4.2",
    )
    invocation.send_signal(signal.SIGTERM)
    result = invocation.finish()
    expect.exit_code_in(result, EXIT_143, "X13")
    expect.that(
        result.markers() == [],
        "X13",
        expect.say("no marker after an interrupted apply", "中断された apply のあとにマーカーが残らない"),
        expect.shown_markers(result.markers()),
        result,
    )
    expect.no_survivors(result, "X13")


@clause("X14")
@pytest.mark.parametrize("name", ["with space", "日本語"])
def test_x14_a_name_with_other_letters_is_applied_or_refused(runner, name):
    before = _tree(runner.lab.sub)
    result = runner.run("apply", name)
    expect.finished(result, "X14")
    if result.rc == 0:
        expect.that(
            result.applied() == [name] and result.marked(name),
            "X14",
            expect.say(
                "applied: apply.sh called once with %r and state/%s.done made",
                "適用: apply.sh が %r で 1 回呼ばれ、state/%s.done が作られる",
            )
            % (name, name),
            expect.say("applied.log: %s, markers: %s", "applied.log は %s、マーカーは %s でした")
            % (result.applied(), result.markers() or expect.say("(none)", "(なし)")),
            result,
        )
        return
    after = _tree(runner.lab.sub)
    expect.that(
        before == after and result.applied() == [],
        "X14",
        expect.say("refused: nothing written, apply.sh not called", "拒否: 何も書かれず、apply.sh も呼ばれない"),
        expect.say("changed: %s, applied.log: %s", "変更がありました: %s(applied.log: %s)")
        % (sorted(set(before.items()) ^ set(after.items())), result.applied()),
        result,
    )
    lines = result.err.strip().splitlines()
    expect.that(
        len(lines) == 1 and "Traceback" not in result.err,
        "X14",
        expect.say("refused with a one-line message on stderr", "標準エラー出力に 1 行のメッセージを書いて拒否する"),
        expect.say("%d line(s) on stderr", "標準エラー出力に %d 行出ていました") % len(lines),
        result,
    )
