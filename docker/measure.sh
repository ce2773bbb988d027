#!/bin/bash
# docker/measure.sh: the grading image's size, and the wall time of one core grading of the
# bundled reference in the container (hardened flags) against the same suite on the host.
#   PYOPS_IMAGE   image to measure (default pyops-lab:ci, as built by docker/ci-test.sh)
# The container grades with the suite baked in at build time and the host with the working tree's:
# rebuild first if the suite changed (the test counts printed below should agree).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
image=${PYOPS_IMAGE:-pyops-lab:ci}
source "$repo/docker/flags.sh"
work=$(mktemp -d /tmp/pyops-measure.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$repo"  # so a python3 without the suite installed still finds it in the checkout

if ! docker image inspect "$image" >/dev/null 2>&1; then
    echo "measure: no image $image; build it first (docker/ci-test.sh)" >&2
    exit 2
fi

# The host's suite: the repo's venv when there is one, else whatever python3 can import.
if [ -x "$repo/.venv/bin/python" ]; then host_python=$repo/.venv/bin/python; else host_python=python3; fi
"$host_python" -c 'import conformance.cli, xdist, psutil' 2>/dev/null \
    || { echo "measure: $host_python cannot import the suite; pip install . first" >&2; exit 2; }

# timed LABEL RESULTS_DIR COMMAND...: run it once, print wall time, exit status, what was graded.
timed() {
    local label=$1 results=$2 start end rc=0
    shift 2
    mkdir -p "$results"
    start=$(date +%s.%N)
    "$@" >"$results/out" 2>&1 || rc=$?
    end=$(date +%s.%N)
    "$host_python" - "$label" "$start" "$end" "$rc" "$results/results.json" <<'EOF'
import json, sys
label, start, end, rc, path = sys.argv[1:]
try:
    report = json.load(open(path))
    what = "%d tests, isolation %s" % (report["summary"]["total"], report["isolation"])
except (OSError, ValueError, KeyError):
    what = "no report"
print("%-10s %7.1f s  exit %s  (%s)" % (label, float(end) - float(start), rc, what))
EOF
}

size=$(docker image inspect -f '{{.Size}}' "$image")
echo "image      $image: $((size / 1000000)) MB"
timed container "$work/container" docker run --rm "${hardened[@]}" -v "$work/container:/results" \
    "$image" --reference
timed host "$work/host" "$host_python" -m conformance --json "$work/host/results.json"
