"""Every timing tolerance of the suite, in one place.

A correct runner must pass on a loaded 2-core machine, so bounds are generous where only a gross
error matters (a runner that never kills, or waits twice as long) and tight only where the lab
pins a number. All of them scale with PYOPS_TIME_SCALE (default 1) for slower machines.
"""

import os


def _scale() -> float:
    try:
        value = float(os.environ.get("PYOPS_TIME_SCALE", "1"))
    except ValueError:
        return 1.0
    return value if value >= 1 else 1.0


SCALE = _scale()

# A runner's own start-up and shut-down (interpreter, imports, writing runs.jsonl): what it may add
# to the time its command needs.
OVERHEAD_S = 1.5 * SCALE
# Waiting for the runner to act on something it observes (a deadline, SIGTERM, a child's exit).
REACTION_S = 1.0 * SCALE
# How early a wait may end: clocks and sleeps round, but a runner must not cut a timeout short.
EARLY_S = 0.05
# How long killed processes may take to disappear before they count as survivors (a SIGKILL'd
# process is gone within milliseconds; only a runner that did not kill it makes the suite wait).
SURVIVOR_GRACE_S = 0.5 * SCALE
# How long the harness waits for something it expects to see (a process, a file).
APPEAR_S = 5.0 * SCALE
# The harness's own deadline for a runner invocation beyond the time the test expects: after it,
# the runner is killed and reported as not finishing.
HANG_MARGIN_S = 8.0 * SCALE
# How often observations are polled: short enough not to distort the timings measured above.
POLL_S = 0.01
