"""Every clause of the lab once: its step, profile, text and a hint, in English and Japanese.

The IDs and texts follow the lab's clause-by-clause rendering (S1.1 ... S8.3 for the core profile,
X1 ... X14 for the extended one). Tests name the clause they check; failure messages quote it.
"""

import unicodedata
from dataclasses import dataclass
from typing import Dict, List

CORE = "core"
EXTENDED = "extended"
PROFILES = (CORE, EXTENDED)
LANGUAGES = ("en", "ja")


@dataclass(frozen=True)
class Clause:
    id: str
    text_en: str
    text_ja: str
    hint_en: str
    hint_ja: str

    @property
    def step(self) -> str:
        """The lab step: S1 ... S8, or X for every extended clause."""
        return self.id.split(".")[0] if self.id.startswith("S") else "X"

    @property
    def profile(self) -> str:
        return CORE if self.id.startswith("S") else EXTENDED

    def text(self, lang: str) -> str:
        return self.text_ja if lang == "ja" else self.text_en

    def hint(self, lang: str) -> str:
        return self.hint_ja if lang == "ja" else self.hint_en


_TABLE = [
    (
        "S1.1",
        "`runner.py run -- CMD...` runs CMD as an argv list (no shell)",
        "`runner.py run -- CMD...` は CMD を argv のリストとして実行する(シェルを使わない)",
        "Take the command with nargs=argparse.REMAINDER (or everything after `--`) and pass the list "
        "to subprocess as it is; never join it into a string and never use shell=True.",
        "コマンドは nargs=argparse.REMAINDER(または `--` のあとの全部)で受け取り、リストのまま "
        "subprocess に渡してください。文字列に連結したり shell=True を使ったりしないでください。",
    ),
    (
        "S1.2",
        "CMD's stdout reaches the runner's stdout unchanged",
        "CMD の標準出力が、そのまま runner の標準出力に出る",
        "Let the child inherit stdout (do not capture it), or copy its bytes unchanged; print nothing "
        "of your own on stdout.",
        "子に標準出力をそのまま継承させる(capture しない)か、バイトを変えずにコピーしてください。"
        "runner 自身のメッセージは標準出力に書かないでください。",
    ),
    (
        "S1.3",
        "the runner exits with CMD's exit code",
        "runner は CMD の終了コードで終了する",
        "Return the child's returncode from main() and call sys.exit(main()).",
        "main() から子の returncode を返し、sys.exit(main()) で終了してください。",
    ),
    (
        "S2.1",
        "`--timeout S`: once S seconds pass, CMD is killed",
        "`--timeout S`: S 秒たつと CMD は強制終了される",
        "Wait with a timeout (subprocess.run(timeout=...) or Popen.wait(timeout=...)) and kill the "
        "command when it expires; do not kill it before S seconds have passed.",
        "timeout 付きで待ち(subprocess.run(timeout=...) や Popen.wait(timeout=...))、期限が来たら"
        "コマンドを強制終了してください。S 秒より前に止めてはいけません。",
    ),
    (
        "S2.2",
        "one line containing `timeout` goes to stderr",
        "`timeout` を含む 1 行が標準エラー出力に出る",
        "On timeout print a line such as `timeout after 1s` to sys.stderr (lowercase `timeout`).",
        "タイムアウトしたら `timeout after 1s` のような行を sys.stderr に書いてください(小文字の timeout)。",
    ),
    (
        "S2.3",
        "the runner exits 124",
        "runner は終了コード 124 で終了する",
        "Catch subprocess.TimeoutExpired (or your own deadline) and return 124.",
        "subprocess.TimeoutExpired(または自分の期限)を捕まえて 124 を返してください。",
    ),
    (
        "S2.4",
        "no process of CMD remains afterwards (grandchildren such as hang.sh's `sleep` included)",
        "タイムアウトのあと CMD のプロセスが残らない(hang.sh の `sleep` のような孫も含む)",
        "Start the command with start_new_session=True and kill the whole group with "
        "os.killpg(proc.pid, signal.SIGKILL); killing only the child leaves hang.sh's sleep running.",
        "start_new_session=True で起動し、os.killpg(proc.pid, signal.SIGKILL) でプロセスグループごと"
        "強制終了してください。子だけを殺すと hang.sh の sleep が残ります。",
    ),
    (
        "S3.1",
        "`--retries N`: a non-zero exit is retried, at most N times (N+1 attempts in all)",
        "`--retries N`: 0 以外で終わったら最大 N 回再試行する(全部で N+1 回)",
        "Loop `for attempt in range(1, retries + 2)` and stop early only on success.",
        "`for attempt in range(1, retries + 2)` でループし、成功したときだけ早く抜けてください。",
    ),
    (
        "S3.2",
        "before retry k (k = 1..N) the runner waits `backoff * 2**(k-1)` seconds; no wait after the last attempt",
        "k 回目の再試行の前に `backoff * 2**(k-1)` 秒待つ。最後の試行のあとは待たない",
        "Sleep backoff * 2 ** (attempt - 1) after failed attempt `attempt` (counted from 1), and only "
        "if another attempt follows.",
        "失敗した試行 attempt(1 から数える)のあとに backoff * 2 ** (attempt - 1) 秒待ち、次の試行が"
        "あるときだけ待ってください。",
    ),
    (
        "S3.3",
        "a timeout (124) is a failure and is retried like any other",
        "タイムアウト(124)も失敗とみなして再試行する",
        "Treat the timeout as rc 124 inside the retry loop instead of returning at once.",
        "タイムアウトはリトライのループの中で rc 124 として扱い、すぐに return しないでください。",
    ),
    (
        "S3.4",
        "an attempt that exits 0 ends the run at once with 0",
        "0 で終わった試行があれば、すぐに 0 で終了する",
        "Return 0 as soon as an attempt succeeds; do not wait or run again.",
        "試行が成功したらすぐに 0 を返してください。待ったり、もう一度実行したりしないでください。",
    ),
    (
        "S3.5",
        "when every attempt failed, the runner exits with the last attempt's code",
        "すべての試行が失敗したら、最後の試行の終了コードで終了する",
        "After the loop, return the rc of the last attempt (124 if it timed out).",
        "ループのあとで、最後の試行の rc(タイムアウトなら 124)を返してください。",
    ),
    (
        "S4.1",
        "`apply NAME` with `state/NAME.done` present: prints `already applied`, exits 0, does not call apply.sh",
        "`state/NAME.done` があれば `already applied` を出力して 0 で終了し、apply.sh を呼ばない",
        "Check Path('/root/pyops/sub/state', f'{name}.done').exists() before calling apply.sh and "
        "print `already applied` on stdout.",
        "apply.sh を呼ぶ前に Path('/root/pyops/sub/state', f'{name}.done').exists() を確かめ、"
        "標準出力に `already applied` を書いてください。",
    ),
    (
        "S4.2",
        "without the marker it calls `/opt/fixtures/pyops/bin/apply.sh NAME`",
        "マーカーがなければ `/opt/fixtures/pyops/bin/apply.sh NAME` を呼ぶ",
        "Run ['/opt/fixtures/pyops/bin/apply.sh', name] with the absolute path, for every NAME "
        "(a NAME such as `help` is a name like any other, not a word for the runner).",
        "['/opt/fixtures/pyops/bin/apply.sh', name] を絶対パスで実行してください。どの NAME でも同じです"
        "(`help` のような NAME もほかの名前と同じで、runner への指示ではありません)。",
    ),
    (
        "S4.3",
        "the marker is created only after apply.sh exited 0",
        "マーカーは apply.sh が 0 で終わったあとにだけ作る",
        "Write the marker after checking rc == 0, never before starting apply.sh.",
        "rc == 0 を確かめたあとでマーカーを書いてください。apply.sh を始める前に作ってはいけません。",
    ),
    (
        "S4.4",
        "when apply.sh fails: no marker, exit 1",
        "apply.sh が失敗したら、マーカーを作らず 1 で終了する",
        "If apply.sh returns non-zero, return 1 without touching the marker.",
        "apply.sh が 0 以外を返したら、マーカーに触れずに 1 を返してください。",
    ),
    (
        "S5.1",
        "apply holds `fcntl.flock(LOCK_EX | LOCK_NB)` on `state/lock` while it works",
        "apply は作業中、`state/lock` に `fcntl.flock(LOCK_EX | LOCK_NB)` のロックを持つ",
        "Open /root/pyops/sub/state/lock, call fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB) and keep "
        "the file open until apply.sh has finished and the marker is written.",
        "/root/pyops/sub/state/lock を開いて fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB) を呼び、"
        "apply.sh が終わってマーカーを書くまでファイルを開いたままにしてください。",
    ),
    (
        "S5.2",
        "when the lock is taken: `another run in progress` on stderr, exit 3, apply.sh not called, nothing changed",
        "ロックを取れなければ `another run in progress` を標準エラー出力に書き、3 で終了する。"
        "apply.sh は呼ばず、何も変えない",
        "Use LOCK_NB (a blocking flock waits instead of failing), catch BlockingIOError (the OSError "
        "with errno EAGAIN that flock raises when the lock is taken), print `another run in progress` "
        "to stderr and return 3.",
        "LOCK_NB を付けてください(付けないと待ってしまいます)。ロックが取られているとき flock が送出する "
        "BlockingIOError(errno が EAGAIN の OSError)を捕まえて、標準エラー出力に `another run in progress` "
        "を書き、3 を返してください。",
    ),
    (
        "S6.1",
        "on SIGTERM the runner forwards SIGTERM to the running command",
        "SIGTERM を受け取ったら、実行中のコマンドに SIGTERM を伝える",
        "Install signal.signal(signal.SIGTERM, handler) and send SIGTERM to the command's process "
        "group (os.killpg) from the handler.",
        "signal.signal(signal.SIGTERM, handler) を登録し、ハンドラーからコマンドのプロセスグループに "
        "SIGTERM を送ってください(os.killpg)。",
    ),
    (
        "S6.2",
        "it waits for the command to end",
        "コマンドが終わるのを待つ",
        "After forwarding SIGTERM keep waiting (communicate()/wait()) until the command has exited; do "
        "not exit at once and do not SIGKILL it straight away.",
        "SIGTERM を伝えたあとも、コマンドが終わるまで communicate()/wait() で待ってください。"
        "すぐに終了したり、すぐに SIGKILL したりしないでください。",
    ),
    (
        "S6.3",
        "it exits 143",
        "終了コード 143 で終了する",
        "When the command has ended after your handler ran, return 143 (128 + SIGTERM).",
        "ハンドラーが動いたあとでコマンドが終わったら、143(128 + SIGTERM)を返してください。",
    ),
    (
        "S6.4",
        "no process of the command remains",
        "コマンドのプロセスが残らない",
        "Start the command with start_new_session=True and forward SIGTERM to its whole group "
        "(os.killpg(proc.pid, signal.SIGTERM)); then, once the command has exited, SIGKILL whatever is "
        "left of that group (os.killpg(proc.pid, signal.SIGKILL), ignoring ProcessLookupError): a "
        "grandchild may ignore SIGTERM and outlive the child you waited for.",
        "start_new_session=True で起動し、SIGTERM をプロセスグループ全体に伝えてください"
        "(os.killpg(proc.pid, signal.SIGTERM))。そのあと、コマンドが終了したら、グループに残ったものを "
        "SIGKILL してください(os.killpg(proc.pid, signal.SIGKILL)、ProcessLookupError は無視)。"
        "孫が SIGTERM を無視して、待っていた子より長く生き残ることがあります。",
    ),
    (
        "S7.1",
        "every attempt appends exactly one JSON object on one line to `/root/pyops/sub/runs.jsonl`",
        "試行ごとに `/root/pyops/sub/runs.jsonl` に JSON オブジェクトを 1 行だけ追記する",
        "Open the file with mode 'a' and write json.dumps(record) + '\\n' once per attempt; never rewrite the file.",
        "ファイルを 'a' モードで開き、試行ごとに json.dumps(record) + '\\n' を 1 回書いてください。"
        "ファイルを書き直してはいけません。",
    ),
    (
        "S7.2",
        "keys: `ts` (ISO 8601 string), `cmd` (list of strings), `attempt` (int, from 1), `rc` (int), "
        "`duration_ms` (int)",
        "キー: `ts`(ISO 8601 の文字列)・`cmd`(文字列のリスト)・`attempt`(1 からの整数)・`rc`(整数)・"
        "`duration_ms`(整数)",
        "Use datetime.now(timezone.utc).isoformat() for ts, the argv list for cmd, attempt counted "
        "from 1, and int((time.monotonic() - start) * 1000) for duration_ms.",
        "ts は datetime.now(timezone.utc).isoformat()、cmd は argv のリスト、attempt は 1 から、"
        "duration_ms は int((time.monotonic() - start) * 1000) にしてください。",
    ),
    (
        "S7.3",
        "a timed-out attempt is recorded too, with `rc` 124",
        "タイムアウトした試行も `rc` 124 で記録する",
        "Write the record after the timeout is handled, in the same place as for other attempts.",
        "タイムアウトを処理したあと、ほかの試行と同じ場所で記録を書いてください。",
    ),
    (
        "S8.1",
        "`apply --dry-run NAME` does not call apply.sh and creates no marker",
        "`apply --dry-run NAME` は apply.sh を呼ばず、マーカーも作らない",
        "Return from the dry run before anything is executed or written.",
        "何かを実行したり書いたりする前に、dry-run の処理から return してください。",
    ),
    (
        "S8.2",
        "it prints what it would do, naming NAME, and exits 0",
        "何をするかを NAME を含めて標準出力に書き、0 で終了する",
        "Print a plan such as `would run apply.sh NAME` on stdout and return 0.",
        "`would run apply.sh NAME` のような計画を標準出力に書いて 0 を返してください。",
    ),
    (
        "S8.3",
        "when NAME is already applied it prints `already applied`",
        "すでに適用済みなら `already applied` を書く",
        "Check the marker in the dry run too and print `already applied` when it exists.",
        "dry-run でもマーカーを確かめ、あれば `already applied` を書いてください。",
    ),
    (
        "X1",
        "a command killed by signal N gives exit code 128+N",
        "シグナル N で終了したコマンドは終了コード 128+N になる",
        "A negative returncode -N means death by signal N: return 128 + N.",
        "returncode が負の -N ならシグナル N で終了しています。128 + N を返してください。",
    ),
    (
        "X2",
        "a missing command gives 127, a non-executable one 126, each with a one-line message and no traceback",
        "存在しないコマンドは 127、実行できないコマンドは 126。どちらも 1 行のメッセージで、トレースバックなし",
        "Catch FileNotFoundError (127) and PermissionError (126) around starting the command and "
        "print one line to stderr.",
        "コマンドの起動を FileNotFoundError(127)と PermissionError(126)で囲み、標準エラー出力に 1 行書いてください。",
    ),
    (
        "X3",
        "SIGTERM during a backoff wait: exit 143 within a second, no further attempt",
        "バックオフの待ち中に SIGTERM: 1 秒以内に 143 で終了し、次の試行はしない",
        "Make the backoff sleep interruptible (for example threading.Event.wait, set from the handler) "
        "and check for the signal before each attempt.",
        "バックオフの sleep を中断できるようにし(ハンドラーから set する threading.Event.wait など)、"
        "試行の前ごとにシグナルを確かめてください。",
    ),
    (
        "X4",
        "stdout is passed byte for byte: binary data, no trailing newline, a megabyte and more",
        "標準出力はバイト単位でそのまま渡す: バイナリ、末尾の改行なし、1 MB 以上",
        "Do not decode or re-print the output; inherit stdout or copy bytes through sys.stdout.buffer.",
        "出力をデコードしたり print し直したりせず、標準出力を継承するか "
        "sys.stdout.buffer にバイトのままコピーしてください。",
    ),
    (
        "X5",
        "stdout streams: a line the command prints appears before the command ends",
        "標準出力は逐次流れる: コマンドが出力した行は、コマンドが終わる前に現れる",
        "Do not collect the output with capture_output/communicate before writing it; inherit stdout.",
        "capture_output や communicate で全部ためてから書かないでください。標準出力を継承してください。",
    ),
    (
        "X6",
        "fractional `--timeout` and `--backoff` work",
        "小数の `--timeout` と `--backoff` が使える",
        "Parse both options with type=float.",
        "両方のオプションを type=float で受け取ってください。",
    ),
    (
        "X7",
        "a missing `state/` folder is created",
        "`state/` フォルダーがなければ作る",
        "Call os.makedirs(state_dir, exist_ok=True) before opening the lock.",
        "ロックを開く前に os.makedirs(state_dir, exist_ok=True) を呼んでください。",
    ),
    (
        "X8",
        "a dry run changes nothing at all: no state folder, lock file, marker or runs.jsonl line",
        "dry-run は何も変えない: state フォルダー、ロックファイル、マーカー、runs.jsonl の行のどれも作らない",
        "Handle --dry-run before creating folders or taking the lock, and only read the marker.",
        "フォルダーを作ったりロックを取ったりする前に --dry-run を処理し、マーカーは読むだけにしてください。",
    ),
    (
        "X9",
        "`ts` carries a UTC offset",
        "`ts` に UTC オフセットが付いている",
        "Use datetime.now(timezone.utc).isoformat(), which ends in +00:00.",
        "datetime.now(timezone.utc).isoformat() を使ってください(末尾が +00:00 になります)。",
    ),
    (
        "X10",
        "apply.sh does not inherit the lock's file descriptor",
        "apply.sh はロックのファイルディスクリプターを引き継がない",
        "Do not pass the lock's fd on (no pass_fds, no os.set_inheritable(fd, True)); Python's default "
        "close_fds=True and O_CLOEXEC already keep it private.",
        "ロックの fd を子に渡さないでください(pass_fds や os.set_inheritable(fd, True) を使わない)。"
        "Python の既定の close_fds=True と O_CLOEXEC で十分です。",
    ),
    (
        "X11",
        "a NAME that would leave `state/` (`/`, `..`) is refused: non-zero exit, nothing written",
        "`state/` の外に出る NAME(`/` や `..`)は拒否する: 0 以外で終了し、何も書かない",
        "Reject names that are empty, `.` or `..`, or contain `/` before doing anything else.",
        "空、`.`、`..`、`/` を含む名前は、ほかのことをする前に拒否してください。",
    ),
    (
        "X12",
        "the command's stderr reaches the runner's stderr",
        "コマンドの標準エラー出力が runner の標準エラー出力に出る",
        "Let the child inherit stderr too (do not capture it).",
        "標準エラー出力も子にそのまま継承させてください(capture しない)。",
    ),
    (
        "X13",
        "SIGTERM while apply.sh runs: exit 143 and no marker",
        "apply.sh の実行中に SIGTERM: 143 で終了し、マーカーは作らない",
        "Forward SIGTERM to apply.sh as in `run`, and skip the marker when the run was interrupted.",
        "run と同じように SIGTERM を apply.sh に伝え、中断されたときはマーカーを作らないでください。",
    ),
    (
        "X14",
        "a NAME with spaces or non-ASCII letters (`with space`, `日本語`) is either applied correctly or refused "
        "with a one-line message, a non-zero exit and nothing written",
        "空白や ASCII 以外の文字を含む NAME(`with space`、`日本語`)は、正しく適用するか、1 行のメッセージと"
        "0 以外の終了コードで拒否して何も書かない",
        "Pass NAME to apply.sh as one argv element and build the marker path from it unchanged; or, if you "
        "allow only some characters, check NAME first and refuse it with one line on stderr before "
        "taking the lock or writing anything.",
        "NAME は argv の 1 要素として apply.sh に渡し、マーカーのパスもそのまま作ってください。使える文字を"
        "制限するなら、ロックを取ったり何かを書いたりする前に NAME を確かめ、標準エラー出力に 1 行書いて"
        "拒否してください。",
    ),
]

CLAUSES: Dict[str, Clause] = {row[0]: Clause(*row) for row in _TABLE}
STEPS: List[str] = ["S%d" % n for n in range(1, 9)] + ["X"]


def in_profile(clause_id: str, profile: str) -> bool:
    """Core runs the S clauses; extended runs them and the X clauses."""
    return profile == EXTENDED or CLAUSES[clause_id].profile == CORE


def steps_for(profile: str) -> List[str]:
    return STEPS if profile == EXTENDED else STEPS[:-1]


def display_width(text: str) -> int:
    """The columns `text` takes in a terminal: a wide (CJK) character takes two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)
