#!/bin/sh
# pyops-grade: the image's entrypoint (behind tini). Grades the learner's runner.py mounted at
# /root/pyops/sub/runner.py with the conformance suite; arguments go to the suite.
#   --reference      grade the bundled reference runner instead (no mount needed)
#   --prairielearn   PrairieLearn's external grader: grade /grade/student/runner.py, write
#                    /grade/results/results.json, exit 0 whenever it was written
#   bash, sh or any other command as the first argument: run it instead (a shell in the lab)
# Exit status is the suite's: 0 all passed, 1 failures, 2 usage or harness error.
#
# The runner under test is untrusted: it runs as an unprivileged uid of its own (--runner-user
# own, unless the caller chose), which cannot read the bundled reference (0700), write the suite
# or signal the grader. Reports are written to a folder of the grader's own and put in place only
# once the suite has ended, when no process of any runner is left to change them.
set -eu
suite_python=/opt/pyops-lab/venv/bin/python3  # the suite's; `python3` is the lab's (runners')
runner=/root/pyops/sub/runner.py
results=/results
student=/grade/student/runner.py
job_results=/grade/results

# `docker run -it pyops-lab bash`: a command, not suite options, so hand over to it.
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ] && command -v "$1" >/dev/null 2>&1; then
    exec "$@"
fi

# Drop our own options from the arguments (--reference goes on to the suite) and note whether the
# caller chose the runner or asked for help themselves.
reference=no chosen=no user_chosen=no prairielearn=no
for arg do
    shift
    case $arg in
        --reference) reference=yes ;;
        --prairielearn) prairielearn=yes; continue ;;
        --runner|--runner=*|-h|--help) chosen=yes ;;
        --runner-user|--runner-user=*) user_chosen=yes ;;
    esac
    set -- "$@" "$arg"
done
[ $user_chosen = yes ] || set -- --runner-user own "$@"

# run_suite ARGS...: the suite as a child, so reports can be moved once it has ended; docker
# stop's SIGTERM (and Ctrl-C) is passed on to it, and it then ends the session as usual. Sets
# $status to its exit status.
run_suite() {
    pyops-conformance "$@" &
    suite=$!
    trap 'kill -TERM $suite 2>/dev/null || true' TERM HUP
    trap 'kill -INT $suite 2>/dev/null || true' INT
    while :; do
        wait $suite && status=0 || status=$?
        kill -0 $suite 2>/dev/null || break  # wait was cut short by a trapped signal
    done
    trap - TERM HUP INT
}

# install_reports FOLDER: the grader's reports from $private into FOLDER. Whatever a runner put
# there while it ran goes first (files of the runner uids, and anything at the reports' names:
# a planted symlink or folder).
install_reports() {
    range=$("$suite_python" -I -c 'from conformance.harness import identity as i; print(i.UID_BASE - 1, i.UID_BASE + i.UID_COUNT)')
    find "$1" -xdev -depth -mindepth 1 -uid +"${range% *}" -uid -"${range#* }" -delete 2>/dev/null || true
    for report in "$private"/*; do
        [ -e "$report" ] || continue
        rm -rf "${1:?}/$(basename "$report")"
        cp "$report" "$1/"
    done
}

private=$(mktemp -d /tmp/pyops-grade-reports.XXXXXX)  # 0700: no runner uid can enter it
trap 'rm -rf "$private"' EXIT

if [ $prairielearn = yes ]; then
    # PrairieLearn keeps results only from a job that exits 0, so every outcome is a results.json:
    # a grading, or "not gradable" (no attempt counted) with what was wrong.
    mkdir -p "$job_results"
    not_gradable() {
        "$suite_python" -I -c 'import json, sys; from conformance.reporting import platforms
json.dump(platforms.prairielearn_not_gradable(sys.argv[1]), open(sys.argv[2], "w"))' "$1" "$private/results.json"
        install_reports "$job_results"
        exit 0
    }
    # A link would be followed as root: one to the bundled reference would grade the reference.
    if [ -L "$student" ]; then
        not_gradable "runner.py is a symbolic link; submit the file itself"
    fi
    if [ ! -f "$student" ]; then
        found=$(ls -A /grade/student 2>/dev/null | tr '\n' ' ')
        not_gradable "no runner.py was submitted (files received: ${found:-none}); submit your runner.py"
    fi
    install -m 0644 "$student" "$runner"
    run_suite --runner "$runner" --prairielearn "$private/results.json" "$@"
    if [ ! -s "$private/results.json" ]; then
        not_gradable "the grader could not grade this submission (exit status $status); please tell the course staff"
    fi
    install_reports "$job_results"
    exit 0
fi

if [ $reference = yes ] && ! "$suite_python" -I -c 'import runner.runner' 2>/dev/null; then
    echo "pyops-grade: --reference: this image has no reference runner (it is the lab image); grade your own with -v \"\$PWD/runner.py:$runner:ro\"" >&2
    exit 2
fi

if [ $reference = no ] && [ $chosen = no ]; then
    if [ ! -f "$runner" ]; then
        if "$suite_python" -I -c 'import runner.runner' 2>/dev/null; then  # the grading image
            echo "pyops-grade: no runner.py to grade: add -v \"\$PWD/runner.py:$runner:ro\" to docker run (or --reference to grade the bundled reference)" >&2
        else  # the lab image, where a learner works
            echo "pyops-grade: no runner.py to grade yet: write $runner (the lab's file), then run pyops-grade again" >&2
        fi
        exit 2
    fi
    # It runs as a uid of its own, which reads it through the "others" permission bits.
    if [ -z "$(find "$runner" -perm -o=r 2>/dev/null)" ]; then
        echo "pyops-grade: $runner is not readable by other users, and the runner runs as one: chmod a+r runner.py on the host" >&2
        exit 2
    fi
    set -- --runner "$runner" "$@"
fi

# A mounted /results gets the reports. Ours come first, so a --json/--gradescope the caller
# gives later wins. Checked up front: failing after a whole grading run would waste it.
if [ ! -d "$results" ]; then
    rm -rf "$private"
    exec pyops-conformance "$@"
fi
probe=$results/.pyops-grade-write-test.$$
if ! (: >"$probe") 2>/dev/null; then
    echo "pyops-grade: cannot write to $results: make the mounted folder writable by root in the container (e.g. chmod a+rwx results)" >&2
    exit 2
fi
rm -f "$probe"
run_suite --json "$private/results.json" --gradescope "$private/gradescope.json" "$@"
install_reports "$results"
exit $status
