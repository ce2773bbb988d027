#!/bin/sh
# pyops-grade: the image's entrypoint (behind tini). Grades the learner's runner.py mounted at
# /root/pyops/sub/runner.py with the conformance suite; arguments go to the suite.
#   --reference   grade the bundled reference runner instead (no mount needed)
#   bash, sh or any other command as the first argument: run it instead (a shell in the lab)
# Exit status is the suite's: 0 all passed, 1 failures, 2 usage or harness error.
set -eu
runner=/root/pyops/sub/runner.py
results=/results

# `docker run -it pyops-lab bash`: a command, not suite options, so hand over to it.
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ] && command -v "$1" >/dev/null 2>&1; then
    exec "$@"
fi

# Drop --reference from the arguments (the suite grades its bundled reference when no --runner
# is given) and note whether the caller chose the runner or asked for help themselves.
reference=no chosen=no
for arg do
    shift
    case $arg in
        --reference) reference=yes; continue ;;
        --runner|--runner=*|-h|--help) chosen=yes ;;
    esac
    set -- "$@" "$arg"
done

if [ $reference = no ] && [ $chosen = no ]; then
    if [ ! -f "$runner" ]; then
        echo "pyops-grade: no runner.py to grade: add -v \"\$PWD/runner.py:$runner:ro\" to docker run (or --reference to grade the bundled reference)" >&2
        exit 2
    fi
    # With --cap-drop ALL root cannot read a mounted file that is private to its host owner.
    if ! (: <"$runner") 2>/dev/null; then
        echo "pyops-grade: cannot read $runner: make it readable on the host (chmod a+r runner.py)" >&2
        exit 2
    fi
    set -- --runner "$runner" "$@"
fi

# A mounted /results gets the reports. Ours come first, so a --json/--gradescope the caller
# gives later wins. Checked up front: with --cap-drop ALL even root cannot write to a folder it
# does not own, and failing after a whole grading run would waste it.
if [ -d "$results" ]; then
    probe=$results/.pyops-grade-write-test.$$
    if ! (: >"$probe") 2>/dev/null; then
        echo "pyops-grade: cannot write to $results: make the mounted folder writable by root in the container (e.g. chmod a+rwx results)" >&2
        exit 2
    fi
    rm -f "$probe"
    set -- --json "$results/results.json" --gradescope "$results/gradescope.json" "$@"
fi

exec pyops-conformance "$@"
