"""Every timing tolerance of the suite, and the clock they are measured on, in one place.

Bounds are measured from the moment the command itself started (read from /proc), never from the
runner's start, so a runner's interpreter start-up on a loaded machine costs no tolerance and the
bounds can be tight: a runner that kills at twice the timeout, waits twice the backoff or reacts
to SIGTERM a second late fails. All of them scale with PYOPS_TIME_SCALE (default 1) for slower
machines.
"""

import os
import time


def _scale() -> float:
    try:
        value = float(os.environ.get("PYOPS_TIME_SCALE", "1"))
    except ValueError:
        return 1.0
    return value if value >= 1 else 1.0


SCALE = _scale()
# Clock ticks per second of /proc/PID/stat's start time.
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def now() -> float:
    """Seconds on the clock /proc measures process start times on (time since boot)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


# A runner's own start-up and shut-down (interpreter, imports, writing runs.jsonl): what it may add
# where a check can only time the runner as a whole (a quick command must not wait for a timeout).
OVERHEAD_S = 1.5 * SCALE
# Acting on something the runner observes (a deadline passed, a backoff over, SIGTERM, its command
# ended): killing, recording the attempt, starting the next one, exiting.
REACTION_S = 0.5 * SCALE
# How early a wait may end: clocks and sleeps round, but a runner must not cut a timeout short.
EARLY_S = 0.05
# How long killed processes may take to disappear before they count as survivors (a SIGKILL'd
# process is gone within milliseconds; only a runner that did not kill it makes the suite wait).
SURVIVOR_GRACE_S = 0.5 * SCALE
# How long the runner's threads must all have been asleep before it counts as waiting for its
# command (the moment S6 sends SIGTERM); a runner that never sleeps is signalled after APPEAR_S.
SETTLE_S = 0.1
# How long the harness waits for something it expects to see (a process, a file).
APPEAR_S = 5.0 * SCALE
# The harness's own deadline for a runner invocation beyond the time the test expects: after it,
# the runner is killed and reported as not finishing.
HANG_MARGIN_S = 8.0 * SCALE
# How often observations are polled: short enough not to distort the timings measured above.
POLL_S = 0.01
