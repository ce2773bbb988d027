#!/bin/bash
# docker/newcomer-test.sh: README's quick start as a new user meets it. Takes the commands from
# the README itself (the ```sh blocks between the `newcomer` markers of its quick start, never a
# copy), runs them in a clean Debian 12 container (the image's own base) holding only this
# project's files, and checks that they end in the step table with every check passed.
#   PYOPS_CA   CA bundle pip needs behind a TLS-inspecting proxy (see docker/engine.sh)
# Prints PASS/FAIL; exits 1 on failure. As root, on the machine docker/ci-test.sh runs on.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/pyops-newcomer.XXXXXX)
trap 'rm -rf "$work"' EXIT
die() { echo "FAIL: $*"; exit 1; }

source "$repo/docker/engine.sh"

awk '/<!-- newcomer/ { on = 1; next } /<!-- \/newcomer -->/ { on = 0 }
     on && /^```sh$/ { code = 1; next } code && /^```$/ { code = 0; next } on && code' \
    "$repo/README.md" >"$work/commands.sh"
[ -s "$work/commands.sh" ] || die "no commands between the newcomer markers of README.md"
echo "README's quick start:"; sed 's/^/    /' "$work/commands.sh"

# The project's files (checkout_tar: no venv, no caches, no .git), streamed into the container.
# Mount namespaces need SYS_ADMIN and an unconfined seccomp profile there (--privileged is not
# needed). Behind a TLS-inspecting proxy pip also needs the CA bundle; that is the network's
# business, not a step of the README.
ca_mount=()
[ -r "$ca" ] && ca_mount=(-v "$ca:/etc/pyops-ca.pem:ro" -e PIP_CERT=/etc/pyops-ca.pem)
rc=0
checkout_tar |
    timeout 1200 docker run --rm -i --cap-add SYS_ADMIN --security-opt seccomp=unconfined "${ca_mount[@]}" \
        -v "$work/commands.sh:/tmp/commands.sh:ro" debian:bookworm-slim \
        bash -c 'mkdir /root/pyops-lab && cd /root/pyops-lab && tar -xf - && bash -e /tmp/commands.sh' \
        >"$work/out" 2>&1 || rc=$?
if [ "$rc" = 0 ] && grep -Eq '^[0-9]+ passed, 0 failed, 0 errors, 0 skipped$' "$work/out" \
       && grep -q '^S8 .* PASS$' "$work/out"; then
    echo "PASS: README's quick start in a clean container: $(grep -E '^[0-9]+ passed, ' "$work/out")"
else
    tail -25 "$work/out"
    die "README's quick start in a clean container: exit $rc, no passing step table"
fi
