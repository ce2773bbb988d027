"""The values a grading gives the runner that a runner must not be able to predict, drawn from a seed.

A runner that reads the public suite knows every fixed value it uses, and could work only for
those: kill after two seconds whatever the timeout, wait only the backoffs the suite gives. So the
values that tell such a runner from a correct one (a timeout a command must survive, one it must be
killed at, a backoff, the names applied) are drawn per grading from a seed, within ranges that
keep a grading as short as its longest fixed scenario (the backoff schedule's seven seconds).

The seed is random unless given (`--seed N`, a course's `seed` in lab.toml, a replay's recorded
one); the report's provenance records it, so a grading can be played again exactly. Every process of
one grading (its pytest-xdist workers) draws from the same seed, so all of them play the same
scenarios.
"""

import random
import secrets
from dataclasses import dataclass
from typing import Dict

# The kinds of plain NAME an apply is given (settled reading: core names are `[A-Za-z0-9._-]`),
# each with the example the checks are named after: the name itself is drawn per grading.
NAME_KINDS = ("db-migration", "v1.2.3", "x", "feature_2", "help")
_WORDS = ("add", "drop", "index", "users", "orders", "schema", "cache", "audit", "billing", "search")
SEED_BITS = 31


@dataclass(frozen=True)
class Draws:
    """One grading's drawn values; see the module's docstring."""

    seed: int
    # `--timeout SURVIVED_TIMEOUT_S` of a command that ends SURVIVED_COMMAND_S after it starts,
    # well before the timeout but later than the two seconds a runner that ignores the value
    # might kill at.
    survived_timeout_s: int
    survived_command_s: float
    # `--timeout KILL_TIMEOUT_S` of a command that never ends: killed at that value, not at one
    # the runner chose.
    kill_timeout_s: int
    # `--retries 1 --backoff LAST_BACKOFF_S`: one wait, of this length, and none after.
    last_backoff_s: int
    # The NAME applied for each of NAME_KINDS ("help" stays "help": it is the word a runner
    # might take for its own).
    names: Dict[str, str]

    def name(self, kind: str) -> str:
        return self.names[kind]


def draw(seed: int) -> Draws:
    """The values seed `seed` gives (the same on every machine and Python)."""
    rng = random.Random(seed)
    survived_timeout_s = rng.choice((4, 5))
    first, second = rng.sample(_WORDS, 2)
    names = {
        "db-migration": "%s-%s" % (first, second),
        "v1.2.3": "v%d.%d.%d" % (rng.randint(1, 9), rng.randint(0, 20), rng.randint(0, 50)),
        "x": rng.choice("abcdefghijkmnpqrstuvwxyz"),
        "feature_2": "%s_%d" % (rng.choice(_WORDS), rng.randint(2, 99)),
        "help": "help",
    }
    return Draws(
        seed=seed,
        survived_timeout_s=survived_timeout_s,
        survived_command_s=survived_timeout_s - 1.5,
        kill_timeout_s=rng.choice((3, 4)),
        last_backoff_s=rng.choice((2, 3)),
        names=names,
    )


def new_seed() -> int:
    return secrets.randbits(SEED_BITS)


# This grading's draws: set by the plugin once the seed is known (the controller's and each
# worker's), before any check plays a scenario.
CURRENT = draw(0)


def use(seed: int) -> Draws:
    """Make `seed`'s draws this process's CURRENT, and return them."""
    global CURRENT
    CURRENT = draw(seed)
    return CURRENT
