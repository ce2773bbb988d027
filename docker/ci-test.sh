#!/bin/bash
# docker/ci-test.sh: build the grading image and check its grading contract for real, under the
# hardened flags graders should use. Idempotent; for a fresh Debian 12 machine, as root, that
# reaches Debian's mirror and PyPI but no container registry.
#   PYOPS_IMAGE   tag to build and test (default pyops-lab:ci)
#   PYOPS_CA      CA bundle pip needs behind a TLS-inspecting proxy (default: $PIP_CERT, else
#                 $SSL_CERT_FILE, else Debian's bundle when present)
# Prints PASS/FAIL lines; exits 1 when any check failed.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
image=${PYOPS_IMAGE:-pyops-lab:ci}
source "$repo/docker/flags.sh"
work=$(mktemp -d /tmp/pyops-ci.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
die() { echo "FAIL: $*"; exit 1; }

# ---- engine, base image, build -------------------------------------------------------------
PYOPS_IMAGE=$image bash "$repo/docker/build-images.sh" || exit 1

size=$(docker image inspect -f '{{.Size}}' "$image")
if [ "$size" -le $((250 * 1000 * 1000)) ]; then pass "image size $((size / 1000000)) MB <= 250 MB"
else fail "image size $((size / 1000000)) MB > 250 MB"; fi

# ---- the image as a lab ----------------------------------------------------------------------
layout=$(docker run --rm "${hardened[@]}" "$image" sh -c \
    'cat /proc/1/comm; stat -c "%a %U" /root /opt/fixtures/pyops/bin/*.sh /root/pyops/sub/state "$(/opt/pyops-lab/venv/bin/python3 -c "import runner, os; print(os.path.dirname(runner.__file__))")"; ls -A /root/pyops/sub; ls -A /root/pyops/sub/state')
expected='tini
711 root
755 root
755 root
755 root
755 root
700 root
state'
if [ "$layout" = "$expected" ]; then pass "shell: tini is PID 1, /root 0711, fixtures 0755, reference 0700, sub/ holds only an empty state/"
else fail "image layout: got $(echo "$layout" | tr '\n' ' ')"; fi

# ---- the lab image: the suite for self-checks, no reference ------------------------------------
if docker run --rm --network none "$image-lab" /opt/pyops-lab/venv/bin/python3 -c 'import runner' 2>/dev/null; then
    fail "lab image: the reference runner is importable"
else pass "lab image: no reference runner"; fi
rc=0; docker run --rm "${hardened[@]}" "$image-lab" --reference >"$work/lab-out" 2>"$work/lab-err" || rc=$?
if [ "$rc" = 2 ] && [ "$(wc -l <"$work/lab-err")" = 1 ]; then pass "lab image, --reference: exit 2, $(cat "$work/lab-err")"
else fail "lab image, --reference: exit $rc, $(head -3 "$work/lab-err")"; fi
# The self-test needs the bundled correct runners: the lab image has none and says so; the grading
# image has them (root-only, as the reference) and a wrong runner of the zoo is judged there.
rc=0; docker run --rm "${hardened[@]}" --entrypoint /usr/local/bin/pyops-conformance "$image-lab" selftest \
    >"$work/selftest-out" 2>"$work/selftest-err" || rc=$?
if [ "$rc" = 2 ] && [ "$(wc -l <"$work/selftest-err")" = 1 ] && grep -q "lab image leaves out" "$work/selftest-err"; then
    pass "lab image, selftest: exit 2, $(cat "$work/selftest-err")"
else fail "lab image, selftest: exit $rc, $(head -3 "$work/selftest-err")"; fi
rc=0; docker run --rm "${hardened[@]}" --entrypoint /usr/local/bin/pyops-conformance "$image" selftest \
    -k exit-0-on-failure >"$work/selftest-out" 2>&1 || rc=$?
if [ "$rc" = 0 ] && grep -q "^wrong runners of the zoo: 1 of 1 fail their own clause" "$work/selftest-out"; then
    pass "grading image, selftest -k exit-0-on-failure: $(tail -1 "$work/selftest-out")"
else fail "grading image, selftest: exit $rc, $(tail -5 "$work/selftest-out" | tr '\n' ' ')"; fi
lab_python=$(docker run --rm --network none "$image-lab" sh -c 'command -v python3; python3 -c "import conformance" 2>&1 | tail -1')
if [ "$lab_python" = "/usr/bin/python3
ModuleNotFoundError: No module named 'conformance'" ]; then pass "lab image: python3 is the system's, which cannot import the suite"
else fail "lab image: python3 is $(echo "$lab_python" | tr '\n' ' ')"; fi
rc=0; docker run --rm "${hardened[@]}" "$image-lab" >"$work/lab-out" 2>"$work/lab-err" || rc=$?
if [ "$rc" = 2 ] && grep -q "write /root/pyops/sub/runner.py" "$work/lab-err"; then pass "lab image, no runner yet: $(cat "$work/lab-err")"
else fail "lab image, no runner yet: exit $rc, $(head -3 "$work/lab-err")"; fi

# ---- grading ---------------------------------------------------------------------------------
reference=$(docker run --rm --network none "$image" /opt/pyops-lab/venv/bin/python3 -c 'import runner.runner as r; print(r.__file__)')
docker run --rm --network none "$image" cat "$reference" >"$work/reference.py"
# A learner's session in the lab image: write the lab's runner.py, then grade it by its name alone.
session='cat > /root/pyops/sub/runner.py && chmod a+r /root/pyops/sub/runner.py && pyops-conformance --clause S1'
rc=0; docker run --rm -i "${hardened[@]}" --entrypoint sh "$image-lab" -c "$session" <"$work/reference.py" \
    >"$work/lab-out" 2>&1 || rc=$?
if [ "$rc" = 0 ] && grep -q "^runner: /root/pyops/sub/runner.py, python: /usr/bin/python3" "$work/lab-out"; then
    pass "lab image: a runner written in the lab is graded with the system python3 ($(tail -1 "$work/lab-out"))"
else fail "lab image, a learner's session: exit $rc, $(head -5 "$work/lab-out" | tr '\n' ' ')"; fi
# Two wrong runners, each a small edit of the reference with one known mistake.
mkdir -p "$work/timeout0" "$work/nomarker"
sed 's/^EXIT_TIMEOUT = 124$/EXIT_TIMEOUT = 0/' "$work/reference.py" >"$work/timeout0/runner.py"
sed 's/^\( *\)write_marker(marker)$/\1pass  # forgets the marker/' "$work/reference.py" >"$work/nomarker/runner.py"
cmp -s "$work/reference.py" "$work/timeout0/runner.py" && die "sed did not break the timeout runner"
cmp -s "$work/reference.py" "$work/nomarker/runner.py" && die "sed did not break the marker runner"

# A root-only secret where a course keeps its files: a grader that follows a runner's link to it
# would quote it in the reports (tests/hostile/leaves_links_and_fifos.py links to /root/secret).
secret_text="pyops-secret-$RANDOM$RANDOM$RANDOM"
echo "$secret_text" >"$work/secret"
chmod 0600 "$work/secret"
secret_mount=(-v "$work/secret:/root/secret:ro")
quotes_secret() { grep -rlF "$secret_text" "$@" 2>/dev/null; }

# grade NAME RUNNER|- [SUITE ARGS...]: run the image hardened, results in $work/NAME; sets $rc.
drop_mount=()
grade() {
    local name=$1 runner=$2; shift 2
    local mounts=(-v "$work/$name/results:/results" "${drop_mount[@]}" "${secret_mount[@]}")
    mkdir -p "$work/$name/results"
    [ "$runner" = - ] || mounts+=(-v "$runner:/root/pyops/sub/runner.py:ro")
    rc=0
    docker run --rm "${hardened[@]}" "${mounts[@]}" "$image" "$@" >"$work/$name/out" 2>"$work/$name/err" || rc=$?
}

# check_reports NAME EXPECT_CLAUSE|-: results.json and gradescope.json well formed and agreeing;
# with a clause: at least one failed test of that clause and none of step S1 (the basics).
check_reports() {
    docker run --rm -i --network none -v "$work/$1/results:/r:ro" "$image" python3 - "$2" <<'EOF'
import json, sys
want = sys.argv[1]
report = json.load(open("/r/results.json"))
grades = json.load(open("/r/gradescope.json"))
tests = report["tests"]
assert tests and all({"clause", "outcome"} <= set(t) for t in tests), "tests lack clause/outcome"
assert isinstance(grades["score"], (int, float)) and isinstance(grades["max_score"], (int, float))
assert [t["number"] for t in grades["tests"]] == list(report["clauses"]), "gradescope lists other than the clauses"
assert (grades["score"], grades["max_score"]) == (report["score"]["points"], report["score"]["max_points"]), "scores disagree"
failed = sorted({t["clause"] for t in tests if t["outcome"] != "passed"})
if want == "-":
    assert not failed, "failed: %s" % failed
else:
    assert want in failed, "no failed %s test (failed: %s)" % (want, failed)
    assert not [c for c in failed if c.startswith("S1.")], "S1 failed too: %s" % failed
print("%d tests, failed clauses: %s" % (len(tests), " ".join(failed) or "none"))
EOF
}

verdict() {  # verdict WHAT NAME WANTED_RC CLAUSE|-
    local what=$1 name=$2 want=$3 clause=$4 detail
    if [ "$rc" != "$want" ]; then
        fail "$what: exit $rc, expected $want"; tail -n 5 "$work/$name/err" "$work/$name/out"; return
    fi
    if detail=$(check_reports "$name" "$clause" 2>&1); then pass "$what: exit $rc; $detail"
    else fail "$what: exit $rc but reports wrong: $(echo "$detail" | tail -1)"; fi
}

grade correct "$work/reference.py" --view pytest  # pytest's view: its header says how many run checks
verdict "correct runner (reference mounted as runner.py)" correct 0 -
parallel=$(grep -o "checks in parallel: [0-9]*" "$work/correct/out" | grep -o "[0-9]*$" || true)
if grep -q "isolation: chroot" "$work/correct/out" && [ "${parallel:-0}" -ge 2 ]; then
    pass "chroot isolation: each check in a system root of its own, $parallel at once"
else fail "chroot isolation: $(grep -m2 "isolation:\|in parallel" "$work/correct/out" | tr '\n' ' ')"; fi

# Without SYS_CHROOT the suite falls back to the real lab paths, one check at a time, and says why.
hardened_no_chroot=()
for ((i = 0; i < ${#hardened[@]}; i++)); do
    if [ "${hardened[i]}" = --cap-add ] && [ "${hardened[i + 1]}" = SYS_CHROOT ]; then i=$((i + 1)); continue; fi
    hardened_no_chroot+=("${hardened[i]}")
done
mkdir -p "$work/shared/results"
rc=0; docker run --rm "${hardened_no_chroot[@]}" -v "$work/shared/results:/results" \
    -v "$work/reference.py:/root/pyops/sub/runner.py:ro" "$image" --clause S1 --view pytest \
    >"$work/shared/out" 2>"$work/shared/err" || rc=$?
if [ "$rc" = 0 ] && grep -q "isolation: shared" "$work/shared/out" && grep -q -- "--cap-add SYS_CHROOT" "$work/shared/out" \
       && ! grep -q "workers" "$work/shared/out"; then
    pass "no SYS_CHROOT: shared isolation, one check at a time, no workers, the header says why; S1 passes"
else fail "no SYS_CHROOT: exit $rc, $(grep -m2 "isolation:\|SYS_CHROOT\|workers" "$work/shared/out" | tr '\n' ' ')"; fi
grade timeout0 "$work/timeout0/runner.py"
verdict "wrong runner: timeout exits 0, not 124" timeout0 1 S2.3
grade nomarker "$work/nomarker/runner.py"
verdict "wrong runner: never writes the marker" nomarker 1 S4.3

# Arguments after the image name reach the suite: only the S1 checks, of the bundled reference.
grade reference - --reference -k test_s1
if [ "$rc" = 0 ] && docker run --rm --network none -v "$work/reference/results:/r:ro" "$image" \
       python3 -c 'import json; t = json.load(open("/r/results.json"))["tests"]; assert t and all(x["clause"].startswith("S1.") for x in t)'
then pass "--reference -k test_s1: exit 0, only S1 checks graded"
else fail "--reference -k test_s1: exit $rc or checks other than S1 graded"; fi

rc=0
docker run --rm --network none --cap-drop ALL --security-opt no-new-privileges \
    -v "$work/reference.py:/root/pyops/sub/runner.py:ro" "$image" >"$work/nocaps-out" 2>"$work/nocaps-err" || rc=$?
if [ "$rc" = 2 ] && [ "$(wc -l <"$work/nocaps-err")" = 1 ] && grep -q -- '--cap-add SETUID' "$work/nocaps-err"; then
    pass "plain --cap-drop ALL: refused, exit 2 and one line: $(cat "$work/nocaps-err")"
else fail "plain --cap-drop ALL: exit $rc, stderr: $(head -3 "$work/nocaps-err")"; fi

grade norunner -
if [ "$rc" = 2 ] && [ "$(wc -l <"$work/norunner/err")" = 1 ] && grep -q 'runner.py:ro' "$work/norunner/err" \
       && [ ! -s "$work/norunner/out" ]
then pass "no runner mounted: exit 2 and one line: $(cat "$work/norunner/err")"
else fail "no runner mounted: exit $rc, stderr: $(head -3 "$work/norunner/err")"; fi

# ---- PrairieLearn: its runtime flags, a job folder at /grade, results.json and exit 0 ---------
# pl NAME RUNNER|-: grade a job whose student submitted RUNNER (or nothing); sets $rc, $seconds.
pl() {
    local name=$1 submitted=$2 start
    mkdir -p "$work/$name/grade/student"
    [ "$submitted" = - ] || cp "$submitted" "$work/$name/grade/student/runner.py"
    start=$(date +%s)
    rc=0
    docker run --rm --network none --memory 2g --pids-limit 1024 -v "$work/$name/grade:/grade" "${secret_mount[@]}" \
        "$image" --prairielearn \
        >"$work/$name/out" 2>"$work/$name/err" || rc=$?
    seconds=$(( $(date +%s) - start ))
}

check_pl() {  # check_pl NAME WHAT EXPECT: EXPECT is full, partial:CLAUSE or not-gradable
    local name=$1 what=$2 want=$3 detail
    if [ "$rc" != 0 ]; then fail "PrairieLearn, $what: exit $rc (must be 0)"; tail -5 "$work/$name/err"; return; fi
    # PrairieLearn's default timeout is 30 s, container start included.
    if [ "$seconds" -gt 30 ]; then fail "PrairieLearn, $what: ${seconds}s, over PrairieLearn's default 30 s"; return; fi
    if detail=$(docker run --rm -i --network none -v "$work/$name/grade:/grade:ro" "$image" python3 - "$want" <<'EOF'
import json, os, sys
want = sys.argv[1]
path = "/grade/results/results.json"
assert os.path.getsize(path) < 1_000_000, "results.json over 1 MB"
result = json.load(open(path))
if want == "not-gradable":
    assert result["gradable"] is False and "runner.py" in result["format_errors"][0], result
    print("not gradable: %s" % result["format_errors"][0])
    sys.exit(0)
assert result["gradable"] is True and 0 <= result["score"] <= 1, result.get("score")
tests = result["tests"]
assert tests and all({"name", "description", "points", "max_points", "message", "output"} <= set(t) for t in tests)
earned = sum(t["points"] for t in tests) / sum(t["max_points"] for t in tests)
assert abs(result["score"] - earned) < 1e-3, "score %s, but the clauses' points make %s" % (result["score"], earned)
if want == "full":
    assert result["score"] == 1, result["score"]
else:
    clause = want.split(":")[1]
    assert result["score"] < 1, "score %s" % result["score"]
    assert any(t["points"] == 0 and t["name"].startswith(clause + " ") for t in tests), "%s passed" % clause
print("score %.3f over %d clauses" % (result["score"], len(tests)))
EOF
    ); then pass "PrairieLearn, $what: exit 0 after ${seconds}s; $detail"
    else fail "PrairieLearn, $what: $(echo "$detail" | tail -1)"; fi
}

pl pl-correct "$work/reference.py"
check_pl pl-correct "correct runner" full
pl pl-wrong "$work/timeout0/runner.py"
check_pl pl-wrong "wrong runner (timeout exits 0)" partial:S2.3
pl pl-none -
check_pl pl-none "nothing submitted" not-gradable
# A link to the bundled reference, which the entrypoint would otherwise copy as root and grade.
mkdir -p "$work/pl-link/grade/student"
ln -s "$(docker run --rm "$image" /opt/pyops-lab/venv/bin/python3 -c 'import runner.runner as r; print(r.__file__)')" \
    "$work/pl-link/grade/student/runner.py"
pl pl-link -
check_pl pl-link "runner.py a symbolic link to the reference" not-gradable
# The runner leaves links to a root-only secret, a FIFO and a link to /dev/zero in its lab.
cat "$repo/tests/hostile/leaves_links_and_fifos.py" "$work/reference.py" >"$work/traps.py"
pl pl-traps "$work/traps.py"
what="PrairieLearn, runner that leaves links and FIFOs"
if [ "$rc" != 0 ]; then fail "$what: exit $rc"
elif quoted=$(quotes_secret "$work/pl-traps/grade"); then fail "$what: secret quoted in $quoted"
elif detail=$(docker run --rm -i --network none -v "$work/pl-traps/grade:/grade:ro" "$image" python3 - <<'EOF'
import json
result = json.load(open("/grade/results/results.json"))
assert result["gradable"] is True and result["score"] < 1, (result["gradable"], result.get("score"))
print("score %.3f, no secret quoted" % result["score"])
EOF
); then pass "$what: exit 0 after ${seconds}s; $detail"
else fail "$what: $(echo "$detail" | tail -1)"; fi

# ---- hostile runners: each must end with exit 1, the suite's own reports and nothing left ------
# check_hostile NAME: results.json and gradescope.json are the suite's (failures counted, the
# runner's forgeries gone) and agree with the exit code.
check_hostile() {
    docker run --rm -i --network none -v "$work/$1/results:/r:ro" "$image" python3 - <<'EOF'
import json, os
report = json.load(open("/r/results.json"))
grades = json.load(open("/r/gradescope.json"))
failed = report["summary"]["failed"]
assert failed > 0, "no failure: summary %s" % report["summary"]
assert len(grades["tests"]) == len(report["clauses"]) and report["summary"]["total"] == len(report["tests"]), "reports disagree"
assert grades["score"] < grades["max_score"], "gradescope score %s/%s" % (grades["score"], grades["max_score"])
assert sorted(os.listdir("/r")) == ["gradescope.json", "results.json"], os.listdir("/r")
print("%d of %d checks failed" % (failed, report["summary"]["total"]))
EOF
}

# hostile NAME WHAT ISOLATION [CLAUSE]: grade $work/NAME/runner.py on CLAUSE (default S1: every
# check starts the runner)
hostile() {
    local name=$1 what=$2 isolation=$3 clause=${4:-S1} detail
    chmod a+r "$work/$name/runner.py"
    rm -rf "$work/$name/results"
    mkdir -p -m 0777 "$work/$name/results"  # open to every uid, as a careless grader might leave it
    grade "$name" "$work/$name/runner.py" --clause "$clause" --isolation "$isolation"
    if [ "$rc" != 1 ]; then
        fail "hostile runner ($isolation), $what: exit $rc, expected 1"; tail -n 5 "$work/$name/err" "$work/$name/out"
        return 1
    fi
    if detail=$(check_hostile "$name" 2>&1); then pass "hostile runner ($isolation), $what: exit 1; $detail"
    else fail "hostile runner ($isolation), $what: $(echo "$detail" | tail -1)"; return 1; fi
}

for name in reads-reference imports-reference forges-reports rewrites-suite kills-everyone leaves-traps leaves-daemon drop; do
    mkdir -p "$work/$name"
done
chmod 0777 "$work/drop"
cat >"$work/reads-reference/runner.py" <<'EOF'
import glob, runpy, sys
found = glob.glob("/opt/pyops-lab/venv/lib/python3*/site-packages/runner/runner.py")
if not found:
    sys.exit(1)
sys.argv[0] = found[0]
runpy.run_path(found[0], run_name="__main__")
EOF
cat >"$work/imports-reference/runner.py" <<'EOF'
import glob, sys
sys.path[:0] = glob.glob("/opt/pyops-lab/venv/lib/python3*/site-packages")
from runner.runner import main
sys.exit(main(sys.argv[1:]))
EOF
cat >"$work/forges-reports/runner.py" <<'EOF'
import json, os
full = {"score": 162, "max_score": 162, "tests": [], "summary": {"passed": 162, "failed": 0, "total": 162}}
for name in ("results.json", "gradescope.json"):
    try:
        with open(os.path.join("/results", name), "w") as out:
            json.dump(full, out)
    except OSError:
        pass
try:
    os.symlink("/root/pyops/sub/runner.py", "/results/planted")
except OSError:
    pass
EOF
cat >"$work/rewrites-suite/runner.py" <<'EOF'
import glob, sys
for path in glob.glob("/opt/pyops-lab/venv/lib/python3*/site-packages/conformance/**/*.py", recursive=True):
    try:
        with open(path, "w") as out:
            out.write("raise SystemExit(0)\n")
    except OSError:
        pass
sys.exit(1)
EOF
cat >"$work/kills-everyone/runner.py" <<'EOF'
import os, signal
os.kill(-1, signal.SIGKILL)
EOF
cp "$work/traps.py" "$work/leaves-traps/runner.py"
# Its daemon outlives the runner with no environment (no token to track it by), waits 3 s and
# then leaves a mark in /drop and forges the reports. The grading goes on well past those 3 s.
cat >"$work/leaves-daemon/runner.py" <<'EOF'
import os, sys, time
daemon = (
    "import os, time\n"
    "open('/drop/started-%d' % os.getpid(), 'w').close()\n"
    "time.sleep(3)\n"
    "open('/drop/outlived-its-check-%d' % os.getpid(), 'w').close()\n"
    "for name in ('results.json', 'gradescope.json'):\n"
    "    open('/results/' + name, 'w').write('{}')\n"
)
pid = os.fork()
if pid == 0:
    os.setsid()
    os.execve(sys.executable, [sys.executable, "-c", daemon], {})
# Exit only once the daemon is up: the check must end while it lives, or it proves nothing.
deadline = time.time() + 10
while not os.path.exists("/drop/started-%d" % pid) and time.time() < deadline:
    time.sleep(0.02)
sys.exit(1)
EOF
# In a system root (the default under these flags) and on the real lab paths (shared), where the
# runner sees the whole container: the separation by uid must hold there too.
for isolation in chroot shared; do
    hostile reads-reference "reads the bundled reference and runs it" $isolation || true
    hostile imports-reference "imports the bundled reference from the suite's packages" $isolation || true
    hostile forges-reports "writes results.json and gradescope.json itself" $isolation || true
    hostile rewrites-suite "rewrites the suite's installed files" $isolation || true
    hostile kills-everyone "calls kill(-1, SIGKILL)" $isolation || true
    # Graded on S7, whose checks read runs.jsonl (a link to the secret after each call: S7.1 fails).
    if hostile leaves-traps "leaves links to a root-only secret, a FIFO and a link to /dev/zero" $isolation S7; then
        if quoted=$(quotes_secret "$work/leaves-traps"); then fail "hostile runner ($isolation): secret quoted in $quoted"
        else pass "hostile runner ($isolation): its links were not followed, no secret in any report or output"; fi
    fi
done
# Shared only: in a root the daemon could not reach /drop to say it started.
drop_mount=(-v "$work/drop:/drop")
if hostile leaves-daemon "leaves a daemon with an emptied environment" shared; then
    started=$(find "$work/drop" -name 'started-*' | wc -l)
    late=$(find "$work/drop" -name 'outlived-*' | wc -l)
    if [ "$started" -gt 0 ] && [ "$late" = 0 ]; then pass "hostile runner's daemons: $started started, none outlived its check"
    else fail "hostile runner's daemons: $started started, $late outlived their check"; fi
fi
drop_mount=()

echo
if [ "$failures" -gt 0 ]; then echo "ci-test: $failures check(s) FAILED"; exit 1; fi
echo "ci-test: all checks passed"
