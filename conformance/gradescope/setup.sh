#!/usr/bin/env bash
# setup.sh: Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu,
# with network), from /autograder/source: the unzipped autograder.zip that
# `pyops-conformance export gradescope` made (this script, run_autograder, lab.toml and the
# pyops-lab wheel). It sets up the lab as the grading image (Dockerfile) has it:
#   - Ubuntu's python3 and python3-venv; the suite in a venv at /opt/pyops-lab/venv (the system
#     python3, which Gradescope's own harness uses, gets no package installed into it);
#   - the fixtures in /opt/fixtures/pyops/bin (0755), an empty /root/pyops/sub/state, /root 0711;
#   - no reference runner anywhere a runner under test could read it.
# Behind a TLS-inspecting proxy, set PIP_CERT to its CA bundle: pip reads it from the environment.
set -euo pipefail
umask 022

source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
venv=/opt/pyops-lab/venv
say() { echo "pyops-lab setup: $*"; }
die() { echo "pyops-lab setup: error: $*" >&2; exit 1; }

shopt -s nullglob
wheels=("$source_dir"/pyops_lab-*.whl)
[ ${#wheels[@]} = 1 ] || die "expected one pyops_lab wheel in $source_dir, found ${#wheels[@]}: make the zip with pyops-conformance export gradescope"
[ -z "${PIP_CERT:-}" ] || [ -r "$PIP_CERT" ] || die "PIP_CERT=$PIP_CERT: no such readable CA bundle"

say "installing python3 and python3-venv"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends python3 python3-venv >/dev/null
python3 -c 'import sys; sys.exit(sys.version_info < (3, 8))' \
    || die "python3 is $(python3 -V 2>&1 | cut -d' ' -f2); the suite needs 3.8 or later: choose a newer Ubuntu base image"

say "installing $(basename "${wheels[0]}") into $venv"
rm -rf "$venv"
python3 -m venv "$venv"
PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install --quiet "${wheels[0]}"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# The wheel carries the reference runner (package `runner`): a runner under test that found it
# could hand it in as its own. Graded runners run as uids of their own, so the reference goes,
# and so does the wheel's only other copy: /autograder/source is closed to every other user.
rm -rf "$site/runner"
! "$venv/bin/python" -c 'import runner' 2>/dev/null || die "the reference runner is still importable"
chmod 0700 "$source_dir"

say "making the lab's folders"
install -d -m 0755 /opt/fixtures /opt/fixtures/pyops /opt/fixtures/pyops/bin
install -m 0755 "$site"/conformance/fixtures/*.sh /opt/fixtures/pyops/bin/
# /root 0711: each runner runs as a uid of its own, which must pass through /root to the lab
# (but not list it). state/ present and empty, as a learner finds the lab.
chmod 0711 /root
mkdir -p -m 0755 /root/pyops /root/pyops/sub /root/pyops/sub/state

# System roots: each check chrooted into one of its own, so checks run in parallel (Gradescope's
# containers cannot make mount namespaces). Without them the suite grades one check at a time.
say "making the system roots for chroot isolation"
"$venv/bin/pyops-conformance" roots make --count 8 \
    || say "no system roots (the suite will grade one check at a time)"

"$venv/bin/python" -c 'import conformance.plugin, xdist, psutil'
"$venv/bin/pyops-conformance" --help >/dev/null
say "done"
