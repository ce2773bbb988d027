#!/bin/bash
# docker/learner-test.sh: README's learner section as a learner meets it. Takes the commands from
# the README itself (the ```sh blocks between the `learner` markers, never a copy) and runs them
# as an ordinary user in a clean Debian 12 container holding only this project's files:
#   - with user namespaces allowed (Docker's seccomp profile set aside): the first block grades the
#     reference (every check passes), the second a wrong runner.py, whose failed and blocked
#     clauses and step table must be those a root grading on this machine gives;
#   - with Docker's default seccomp profile, which refuses user namespaces: one line, exit 2.
#   PYOPS_CA   CA bundle pip needs behind a TLS-inspecting proxy (see docker/engine.sh)
# Prints PASS/FAIL; exits 1 on failure. As root, on the machine docker/ci-test.sh runs on.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/pyops-learner.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"  # mounted in the container, where the learner reads the blocks
failures=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
die() { echo "FAIL: $*"; exit 1; }

source "$repo/docker/engine.sh"

# The section's ```sh blocks, one file each.
awk -v dir="$work" '/<!-- learner/ { on = 1; next } /<!-- \/learner -->/ { on = 0 }
     on && /^```sh$/ { code = 1; n++; next } code && /^```$/ { code = 0; next }
     on && code { print > (dir "/block" n ".sh") }' "$repo/README.md"
[ -s "$work/block1.sh" ] && [ -s "$work/block2.sh" ] || die "README.md's learner section needs two sh blocks"
for block in "$work"/block*.sh; do echo "README's learner section, $(basename "$block"):"; sed 's/^/    /' "$block"; done

# A wrong runner: the reference that signals only its child on a timeout, not the child's group.
(cd "$repo" && python3 -m conformance.selftest.zoo kills-only-the-child "$work/wrong" >/dev/null)
# What a root grading on this machine says of it, in the same learner view.
python3 -m venv "$work/venv" && "$work/venv/bin/pip" install -q -e "$repo" >/dev/null
rc=0; "$work/venv/bin/pyops-conformance" --runner "$work/wrong/runner.py" >"$work/root.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || { tail -20 "$work/root.out"; die "the root grading of the wrong runner exited $rc"; }
verdicts() {  # the failed clauses' headings, the blocked lines and the step table of a learner view
    grep -E '^\[[SX][0-9.]+\] |^  by [SX][0-9.]+: |^[SX][0-9]? +.* (PASS|FAIL|NOT RUN)$|^[0-9]+ of [0-9]+ clauses' "$1" || true
}

ca_mount=()
[ -r "$ca" ] && ca_mount=(-v "$ca:/etc/pyops-ca.pem:ro" -e PIP_CERT=/etc/pyops-ca.pem)
# As root in the container: what the section asks an administrator for (python3-venv), and an
# ordinary user with this project in a folder of their own. Then the section's blocks, as that user.
cat >"$work/learner.sh" <<'SCRIPT'
set -eu
apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null
useradd -m learner
mkdir /home/learner/pyops-lab && tar -C /home/learner/pyops-lab -xf -
chown -R learner: /home/learner/pyops-lab
as_learner() { runuser -u learner -- env -C /home/learner/pyops-lab ${PIP_CERT:+PIP_CERT=$PIP_CERT} HOME=/home/learner bash -e "$@"; }
echo "== block1"; rc=0; as_learner /blocks/block1.sh 2>&1 || rc=$?; echo "== block1 rc=$rc"
[ "${WRONG:-}" ] || exit 0
install -o learner -m 0644 /blocks/wrong.py /home/learner/pyops-lab/runner.py
echo "== block2"; rc=0; as_learner /blocks/block2.sh 2>&1 || rc=$?; echo "== block2 rc=$rc"
SCRIPT
cp "$work/wrong/runner.py" "$work/wrong.py"

# User namespaces allowed: no capability added, only the seccomp filter that refuses them lifted.
checkout_tar | timeout 1200 docker run --rm -i --security-opt seccomp=unconfined -e WRONG=1 "${ca_mount[@]}" \
    -v "$work:/blocks:ro" debian:bookworm-slim bash /blocks/learner.sh >"$work/out" 2>&1 || true
sed -n '/^== block1$/,/^== block1 rc=/p' "$work/out" >"$work/block1.out"
sed -n '/^== block2$/,/^== block2 rc=/p' "$work/out" >"$work/block2.out"
if grep -q '^== block1 rc=0$' "$work/block1.out" && grep -Eq '^[0-9]+ passed, 0 failed, 0 errors, 0 skipped$' "$work/block1.out" \
        && grep -q '^profile: core, isolation: namespace (in a user namespace' "$work/block1.out"; then
    pass "learner section, as an ordinary user: the reference, $(grep -E '^[0-9]+ passed, ' "$work/block1.out")"
else tail -25 "$work/out"; fail "learner section, as an ordinary user: the reference did not pass"; fi
if grep -q '^== block2 rc=1$' "$work/block2.out" && [ -n "$(verdicts "$work/root.out")" ] \
        && diff <(verdicts "$work/root.out") <(verdicts "$work/block2.out") >"$work/diff"; then
    pass "learner section, a wrong runner: the same verdicts as root's ($(verdicts "$work/root.out" | grep -c '^\[') failed clauses)"
else cat "$work/diff" 2>/dev/null; tail -25 "$work/block2.out"; fail "learner section, a wrong runner: verdicts differ from root's"; fi

# User namespaces refused (Docker's default seccomp profile): one line, exit 2, never a traceback.
checkout_tar | timeout 1200 docker run --rm -i "${ca_mount[@]}" -v "$work:/blocks:ro" debian:bookworm-slim \
    bash /blocks/learner.sh >"$work/off" 2>&1 || true
said=$(sed -n '/^== block1$/,/^== block1 rc=/p' "$work/off" | grep '^pyops-conformance: ' || true)
if grep -q '^== block1 rc=2$' "$work/off" && [ "$(echo "$said" | wc -l)" = 1 ] \
        && echo "$said" | grep -q "cannot grade as uid .* (not root) here: no user namespaces" \
        && ! grep -q Traceback "$work/off"; then
    pass "learner section, user namespaces off: $said"
else tail -15 "$work/off"; fail "learner section, user namespaces off: no one-line refusal"; fi

[ "$failures" = 0 ] || exit 1
