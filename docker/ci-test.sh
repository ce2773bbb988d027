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
hardened=(--network none --cap-drop ALL --security-opt no-new-privileges --pids-limit 512 --memory 1g)
work=$(mktemp -d /tmp/pyops-ci.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
die() { echo "FAIL: $*"; exit 1; }

# ---- tools, engine and base image -------------------------------------------------------------
source "$repo/docker/engine.sh"

# ---- build -----------------------------------------------------------------------------------
# The context goes in as a tar stream so the proxy's CA bundle can be added to it as
# .build-ca.pem without writing anything into the working tree; the Dockerfile uses it in its
# build stage only. A tar stream also works with the legacy builder and with BuildKit alike.
ca_args=()
if [ -r "$ca" ]; then
    ca_args=(-C "$(dirname "$ca")" --transform "s,^$(basename "$ca")\$,.build-ca.pem," "$(basename "$ca")")
fi
if tar -C "$repo" --exclude=./.git --exclude=./.venv --exclude=./results --exclude=__pycache__ \
       --exclude='*.egg-info' -cf - . "${ca_args[@]}" | docker build -t "$image" - >"$work/build.log" 2>&1
then
    pass "docker build ($image)"
else
    tail -30 "$work/build.log"
    die "docker build failed"
fi

size=$(docker image inspect -f '{{.Size}}' "$image")
if [ "$size" -le $((250 * 1000 * 1000)) ]; then pass "image size $((size / 1000000)) MB <= 250 MB"
else fail "image size $((size / 1000000)) MB > 250 MB"; fi

# ---- the image as a lab ----------------------------------------------------------------------
layout=$(docker run --rm "${hardened[@]}" "$image" sh -c \
    'cat /proc/1/comm; stat -c "%a %U" /opt/fixtures/pyops/bin/*.sh /root/pyops/sub/state; ls -A /root/pyops/sub; ls -A /root/pyops/sub/state')
expected='tini
755 root
755 root
755 root
755 root
state'
if [ "$layout" = "$expected" ]; then pass "shell: tini is PID 1, fixtures 0755, sub/ holds only an empty state/"
else fail "image layout: got $(echo "$layout" | tr '\n' ' ')"; fi

# ---- grading ---------------------------------------------------------------------------------
reference=$(docker run --rm --network none "$image" python3 -c 'import runner.runner as r; print(r.__file__)')
docker run --rm --network none "$image" cat "$reference" >"$work/reference.py"
# Two wrong runners, each a small edit of the reference with one known mistake.
mkdir -p "$work/timeout0" "$work/nomarker"
sed 's/^EXIT_TIMEOUT = 124$/EXIT_TIMEOUT = 0/' "$work/reference.py" >"$work/timeout0/runner.py"
sed 's/^\( *\)write_marker(marker)$/\1pass  # forgets the marker/' "$work/reference.py" >"$work/nomarker/runner.py"
cmp -s "$work/reference.py" "$work/timeout0/runner.py" && die "sed did not break the timeout runner"
cmp -s "$work/reference.py" "$work/nomarker/runner.py" && die "sed did not break the marker runner"

# grade NAME RUNNER|- [SUITE ARGS...]: run the image hardened, results in $work/NAME; sets $rc.
grade() {
    local name=$1 runner=$2; shift 2
    local mounts=(-v "$work/$name/results:/results")
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
assert len(grades["tests"]) == len(tests) and grades["max_score"] == len(tests), "gradescope disagrees"
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
        fail "$what: exit $rc, expected $want"; tail -5 "$work/$name/err" "$work/$name/out"; return
    fi
    if detail=$(check_reports "$name" "$clause" 2>&1); then pass "$what: exit $rc; $detail"
    else fail "$what: exit $rc but reports wrong: $(echo "$detail" | tail -1)"; fi
}

grade correct "$work/reference.py"
verdict "correct runner (reference mounted as runner.py)" correct 0 -
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

grade norunner -
if [ "$rc" = 2 ] && [ "$(wc -l <"$work/norunner/err")" = 1 ] && grep -q 'runner.py:ro' "$work/norunner/err" \
       && [ ! -s "$work/norunner/out" ]
then pass "no runner mounted: exit 2 and one line: $(cat "$work/norunner/err")"
else fail "no runner mounted: exit $rc, stderr: $(head -3 "$work/norunner/err")"; fi

echo
if [ "$failures" -gt 0 ]; then echo "ci-test: $failures check(s) FAILED"; exit 1; fi
echo "ci-test: all checks passed"
