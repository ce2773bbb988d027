#!/bin/bash
# docker/measure.sh: how fast a core grading of the bundled reference is, in one run:
#   namespace   on the host (root, private mount namespaces, parallel): wall and CPU-seconds
#   container   the image under the hardened flags (chroot isolation: a system root per check,
#               several at once): wall at 2 CPUs and at --cpus 0.5 --memory 768m (a
#               Gradescope-sized machine), container start included
#   serial sum  the sum of every check's own time (what shared isolation, one check at a time,
#               would wait through)
#   floor       the sum of the waits the scenarios force (timeouts, backoffs, a slow apply.sh),
#               each scenario counted once: what one check at a time can never go below
#   PYOPS_IMAGE   image to measure (default pyops-lab:ci, as built by docker/ci-test.sh)
#   PYOPS_RUNNER_PYTHON   the lab's interpreter for a second host grading (default /usr/bin/python3)
#   PYOPS_MEASURE_RUNS    gradings per line, reported as their median and range (default 3)
# The container grades with the suite baked in at build time and the host with the working tree's:
# rebuild first if the suite changed (the test counts printed below should agree). Measure on an
# idle machine.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
image=${PYOPS_IMAGE:-pyops-lab:ci}
source "$repo/docker/flags.sh"
runs=${PYOPS_MEASURE_RUNS:-3}
case $runs in '' | *[!0-9]* | 0*) echo "measure: PYOPS_MEASURE_RUNS must be a whole number above 0" >&2; exit 2 ;; esac
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

# timed LABEL RESULTS_DIR COMMAND...: run it $runs times; print the median wall time and
# CPU-seconds of the command and its children (for a container: of the docker client only, so not
# shown) with their range, the exit statuses, what was graded, and the serial sum of the checks'
# own times. One run's CPU figure moves by 10 to 20 % from run to run: a single one says little.
timed() {
    local label=$1 results=$2 rcs="" rc run
    shift 2
    for run in $(seq "$runs"); do
        mkdir -p "$results/$run"
        rc=0
        /usr/bin/time -f "%e %U %S" -o "$results/$run/time" "$@" >"$results/$run/out" 2>&1 || rc=$?
        rcs="$rcs$rc "
    done
    "$host_python" - "$label" "$rcs" "$results" "$runs" <<'EOF'
import json, statistics, sys
label, rcs, results, runs = sys.argv[1:]
walls, cpus = [], []
for run in range(1, int(runs) + 1):
    wall, user, system = (float(x) for x in open("%s/%d/time" % (results, run)).read().split()[-3:])
    walls.append(wall)
    cpus.append(user + system)


def spread(values, unit):
    middle = "%.1f %s" % (statistics.median(values), unit)
    return middle if len(values) == 1 else "%s (%.1f-%.1f)" % (middle, min(values), max(values))


cpu = "" if label.startswith("container") else ", " + spread(cpus, "CPU-s")
try:
    report = json.load(open("%s/results.json" % results))  # the last run's
    timing = report["timing"]
    what = "%d checks, isolation %s, %d runner calls, serial sum %.1f s, floor %.1f s" % (
        report["summary"]["total"],
        report["isolation"],
        timing["runner_calls"],
        timing["serial_s"],
        timing["forced_wait_s"],
    )
except (OSError, ValueError, KeyError):
    what = "no report"
print("%-16s %s wall%s, exit %s (%s)" % (label, spread(walls, "s"), cpu, rcs.strip(), what))
EOF
}

# The machine's own speed, before and after: a virtual machine's CPU can slow down by a fifth
# over an hour (its host is shared), and every CPU-second figure moves with it, so figures
# measured at different times compare only next to this.
calibrate() {
    "$host_python" -c 'import time
start = time.process_time()
total = 0
for number in range(20_000_000):
    total += number
print("%.2f" % (time.process_time() - start))'
}

command -v /usr/bin/time >/dev/null || { echo "measure: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }
size=$(docker image inspect -f '{{.Size}}' "$image")
echo "image            $image: $((size / 1000000)) MB, $(nproc) CPUs here"
speed_before=$(calibrate)
# On the host the runners run, by default, on the interpreter the suite's venv was made from; the
# image runs them on Debian's python3, as the lab does. Both are timed where they differ: an
# interpreter whose site-packages import something at start-up costs that 125 times a grading.
# --reference: the suite's default runner is the lab's /root/pyops/sub/runner.py (a learner's),
# which a host that measures has not got (the grading would end in exit 2 and no report).
timed "namespace" "$work/host" "$host_python" -m conformance --reference --json "$work/host/results.json"
lab_python=${PYOPS_RUNNER_PYTHON:-/usr/bin/python3}
if [ -x "$lab_python" ]; then
    timed "namespace, runners on $lab_python" "$work/host-lab-python" \
        "$host_python" -m conformance --reference --python "$lab_python" --json "$work/host-lab-python/results.json"
fi
for cpus in 2 0.5; do
    limits=(--cpus "$cpus")
    [ "$cpus" = 0.5 ] && limits+=(--memory 768m)
    mkdir -p -m 0777 "$work/container-$cpus"
    timed "container $cpus CPU" "$work/container-$cpus" docker run --rm "${hardened[@]}" "${limits[@]}" \
        -v "$work/container-$cpus:/results" "$image" --reference
done
echo "machine speed    a fixed Python loop took $speed_before CPU-s before, $(calibrate) after (less is faster)"
