#!/bin/bash
# docker/gradescope-test.sh: the Gradescope autograder (`pyops-conformance export gradescope`)
# graded as Gradescope grades it, in Debian containers. Idempotent; as root, on the machine
# docker/ci-test.sh runs on (Debian's mirror and PyPI reachable, no container registry).
#   1. the zip, made with the CLI from this checkout;
#   2. Gradescope's image build: a container of the base image gets the zip unzipped into
#      /autograder/source and run_autograder copied to /autograder/run_autograder, runs
#      `bash setup.sh` there (with network: Debian's mirror over HTTP, PyPI with the CA bundle
#      as PIP_CERT) and is committed as the autograder image;
#   3. one fresh container of that image per submission running /autograder/run_autograder,
#      with a submission at /autograder/submission and /autograder/results mounted, under
#      Gradescope's default limits (half a CPU, 768 MB), Docker's default capabilities (no
#      --privileged, no SYS_ADMIN: the suite runs in chroot isolation, in the system roots
#      setup.sh made) and no network: the reference runner (full score), a wrong one (partial score: only the clauses
#      that see a timed-out command's exit code fail), none, and one under another name.
#   PYOPS_GRADESCOPE_IMAGE   tag of the autograder image (default pyops-lab:gradescope)
#   PYOPS_CA                 CA bundle pip needs behind a TLS-inspecting proxy (see docker/engine.sh)
# Prints PASS/FAIL lines and the time each stage took; exits 1 when any check failed.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
image=${PYOPS_GRADESCOPE_IMAGE:-pyops-lab:gradescope}
work=$(mktemp -d /tmp/pyops-gradescope.XXXXXX)
builder=pyops-gradescope-build-$$
trap 'docker rm -f "$builder" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
failures=0
# Gradescope's defaults per container (their troubleshooting page): 1/2 vCPU, 768 MB.
limits=(--cpus 0.5 --memory 768m)

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
die() { echo "FAIL: $*"; exit 1; }

# ---- tools, engine and base image; $ca ----------------------------------------------------------
source "$repo/docker/engine.sh"

# ---- the zip, with the CLI ------------------------------------------------------------------------
if [ -x "$repo/.venv/bin/python" ]; then host_python=$repo/.venv/bin/python; else host_python=python3; fi
cd "$repo"  # so a python3 without the suite installed still finds it in the checkout
start=$(date +%s)
if "$host_python" -m conformance export gradescope --out "$work/autograder.zip" >"$work/export.log" 2>&1; then
    pass "export gradescope in $(($(date +%s) - start)) s: $(cat "$work/export.log")"
else die "export gradescope: $(cat "$work/export.log")"; fi

# Unzipped as Gradescope does, the modes the zip records kept (run_autograder must stay executable).
"$host_python" - "$work/autograder.zip" "$work/source" <<'EOF'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as archive:
    for info in archive.infolist():
        archive.extract(info, sys.argv[2])
        os.chmod(os.path.join(sys.argv[2], info.filename), (info.external_attr >> 16) & 0o777)
EOF
members=$(cd "$work/source" && stat -c '%a %n' -- * | sort -k2 | tr '\n' ' ')
if [[ "$members" =~ ^"644 lab.toml 644 pyops_lab-"[^\ ]*".whl 755 run_autograder 755 setup.sh "$ ]]; then
    pass "zip: $members"
else fail "zip members: $members"; fi

# ---- Gradescope's image build: setup.sh once, with network ----------------------------------------
ca_mount=()
[ -r "$ca" ] && ca_mount=(-v "$ca:/etc/pyops-ca.pem:ro" -e PIP_CERT=/etc/pyops-ca.pem)
start=$(date +%s)
rc=0
tar -C "$work/source" -cf - . |
    timeout 1200 docker run -i --name "$builder" "${ca_mount[@]}" debian:bookworm-slim bash -c '
        set -e
        mkdir -p /autograder/source /autograder/submission /autograder/results
        tar -xf - -C /autograder/source
        cp /autograder/source/run_autograder /autograder/run_autograder
        chmod +x /autograder/run_autograder
        cd /autograder/source
        bash ./setup.sh
        apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/* /var/tmp/*' >"$work/setup.log" 2>&1 || rc=$?
setup_seconds=$(($(date +%s) - start))
if [ "$rc" = 0 ]; then pass "setup.sh in a debian:bookworm-slim container: ${setup_seconds} s"
else tail -25 "$work/setup.log"; die "setup.sh: exit $rc after ${setup_seconds} s"; fi
previous=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
docker commit -c 'WORKDIR /autograder' -c 'CMD ["/autograder/run_autograder"]' "$builder" "$image" >/dev/null
docker rm -f "$builder" >/dev/null
# The previous run's image, untagged by this one, goes.
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$image")" ]; then
    docker rmi "$previous" >/dev/null 2>&1 || true
fi

# The lab as the grading image has it: fixtures 0755, /root 0711, state/ empty, the reference
# nowhere a runner's uid reaches (not importable, the source folder holding the wheel 0700).
layout=$(docker run --rm --network none "$image" sh -c '
    stat -c "%a %U %n" /root /opt/fixtures/pyops/bin/*.sh /root/pyops/sub/state /autograder/source
    ls -A /root/pyops/sub/state
    /opt/pyops-lab/venv/bin/python -c "import runner" 2>/dev/null && echo "reference importable"
    find / -xdev -name runner.py -path "*runner/runner.py" 2>/dev/null
    setpriv --reuid 1900200000 --regid 1900200000 --clear-groups ls /autograder/source >/dev/null 2>&1 \
        && echo "/autograder/source open to a runner uid"
    true')
expected='711 root /root
755 root /opt/fixtures/pyops/bin/apply.sh
755 root /opt/fixtures/pyops/bin/flaky.sh
755 root /opt/fixtures/pyops/bin/hang.sh
755 root /root/pyops/sub/state
700 root /autograder/source'
if [ "$layout" = "$expected" ]; then
    pass "image: /root 0711, fixtures 0755, empty state/, no reference runner, /autograder/source 0700"
else fail "image layout: $(echo "$layout" | tr '\n' ' ')"; fi

# ---- submissions, each graded in a fresh container -------------------------------------------------
mkdir -p "$work/correct/submission" "$work/wrong/submission" "$work/none/submission" "$work/misnamed/submission"
cp "$repo/runner/runner.py" "$work/correct/submission/runner.py"
sed 's/^EXIT_TIMEOUT = 124$/EXIT_TIMEOUT = 0/' "$repo/runner/runner.py" >"$work/wrong/submission/runner.py"
cmp -s "$repo/runner/runner.py" "$work/wrong/submission/runner.py" && die "sed did not break the timeout runner"
cp "$repo/runner/runner.py" "$work/misnamed/submission/runner (1).py"
# A runner that leaves links to a root-only secret (where the course's files are), a FIFO and a
# link to /dev/zero in its lab: followed, the secret would be in the student's results.json.
mkdir -p "$work/traps/submission"
cat "$repo/tests/hostile/leaves_links_and_fifos.py" "$repo/runner/runner.py" >"$work/traps/submission/runner.py"
secret_text="pyops-secret-$RANDOM$RANDOM$RANDOM"
echo "$secret_text" >"$work/secret"
chmod 0600 "$work/secret"

# autograde NAME: run_autograder on $work/NAME/submission; sets $rc and $seconds.
autograde() {
    local name=$1 start
    mkdir -p "$work/$name/results"
    start=$(date +%s)
    rc=0
    timeout 900 docker run --rm --network none "${limits[@]}" \
        -v "$work/$name/submission:/autograder/submission" -v "$work/$name/results:/autograder/results" \
        -v "$work/secret:/root/secret:ro" "$image" /autograder/run_autograder >"$work/$name/out" 2>&1 || rc=$?
    seconds=$(($(date +%s) - start))
}

# judge NAME WHAT EXPECT: results.json as Gradescope reads it. EXPECT: full, timeout-exit, upload or hostile.
judge() {
    local name=$1 what=$2 want=$3 detail
    if [ "$rc" != 0 ] || [ ! -s "$work/$name/results/results.json" ]; then
        fail "$what: exit $rc, results.json $( [ -s "$work/$name/results/results.json" ] && echo written || echo missing)"
        tail -15 "$work/$name/out"
        return
    fi
    if detail=$("$host_python" - "$want" "$work/$name/results/results.json" "$work/$name/out" <<'EOF'
import json, os, sys
want, path, out = sys.argv[1:]
result = json.load(open(path))
assert sorted(os.listdir(os.path.dirname(path))) == ["results.json"], os.listdir(os.path.dirname(path))
assert isinstance(result["execution_time"], (int, float)) and result["execution_time"] >= 0, result.get("execution_time")
tests = result["tests"]
keys = {"name", "number", "score", "max_score", "status", "output", "visibility", "tags"}
assert tests and all(keys <= set(t) for t in tests), "tests lack some of %s" % sorted(keys)
assert all(isinstance(t["score"], (int, float)) and t["status"] in ("passed", "failed") for t in tests)
# One test per clause; their points are whole units of 1/10000 that add up to the totals.
earned, most = sum(t["score"] for t in tests), result["max_score"]
assert abs(result["score"] - earned) <= 1e-9, "score %s, but the tests' scores make %s" % (result["score"], earned)
assert abs(most - sum(t["max_score"] for t in tests)) <= 1e-9, "max_score %s" % most
failed = [t for t in tests if t["status"] == "failed"]
if want == "upload":
    (test,) = tests
    assert result["score"] == 0 and test["name"] == "upload runner.py" and test["visibility"] == "visible", test
    assert "runner.py" in test["output"] and "files received" in test["output"], test["output"]
    print("score 0/%g, %r: %s" % (test["max_score"], test["name"], test["output"]))
    sys.exit(0)
assert all(t["number"] and t["name"].startswith(t["number"] + " ") for t in tests), "a test that is not a clause"
log = open(out, errors="replace").read()
assert "isolation: chroot" in log and "runner user: an unprivileged uid of its own" in log, "not chroot mode as an own uid"
if want == "hostile":
    assert failed and result["score"] < most, "score %s of %s" % (result["score"], most)
    print("score %g/%g, %d of %d clauses failed or blocked" % (result["score"], most, len(failed), len(tests)))
    sys.exit(0)
if want == "full":
    assert not failed and result["score"] == most > 0, "score %s of %s; failed: %s" % (
        result["score"], most, [t["name"] for t in failed])
else:
    # EXIT_TIMEOUT = 0: a timed-out attempt gives 0, not 124. Only the clauses that see that code
    # fail: the exit code after a timeout (S2.3), the retries, which take the 0 for a success and
    # stop (S3.3, S3.5), and runs.jsonl's rc (S7.3); a clause whose checks ran into one of those
    # first (S2.4 checks ask the exit code before they look for survivors) is blocked, not charged.
    assert 0 < result["score"] < most, "score %s of %s" % (result["score"], most)
    broken = sorted(t["number"] for t in failed if not t["output"].startswith("blocked by"))
    assert "S2.3" in broken and set(broken) <= {"S2.3", "S3.3", "S3.5", "S7.3"}, "failures of %s" % broken
    print("score %g/%g, %d of %d clauses failed or blocked (failed: %s): %s" % (
        result["score"], most, len(failed), len(tests), " ".join(broken), ", ".join(t["number"] for t in failed)))
    sys.exit(0)
print("score %g/%g, %d clauses, all passed" % (result["score"], most, len(tests)))
EOF
    ); then pass "$what: ${seconds} s (execution_time $(grep -o '"execution_time": [0-9.]*' "$work/$name/results/results.json" | cut -d' ' -f2) s); $detail"
    else fail "$what: $(echo "$detail" | tail -1)"; tail -15 "$work/$name/out"; fi
}

autograde correct
judge correct "correct runner (the reference)" full
autograde wrong
judge wrong "wrong runner (EXIT_TIMEOUT = 0)" timeout-exit
autograde none
judge none "nothing submitted" upload
autograde misnamed
judge misnamed "runner.py under another name" upload
autograde traps
judge traps "runner that leaves links to a secret and FIFOs" hostile
if grep -rlF "$secret_text" "$work/traps" >/dev/null; then fail "runner that leaves links: the secret is quoted"
else pass "runner that leaves links: no secret in results.json or the log"; fi

echo
if [ "$failures" -gt 0 ]; then echo "gradescope-test: $failures check(s) FAILED"; exit 1; fi
echo "gradescope-test: all checks passed"
