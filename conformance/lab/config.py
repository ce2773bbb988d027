"""The lab configuration (TOML): profile, language, points per step or clause, visibility.

The shipped lab.toml is the default. A score is the sum of the points of the clauses passed
(verdicts.py): each step's points are shared by its clauses (a clause given points of its own
keeps those, and the step's other clauses share the rest).
"""

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from conformance.lab.clauses import CLAUSES, CORE, LANGUAGES, PROFILES, STEPS, steps_for
from conformance.lab.draws import SEED_BITS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the same parser, before it joined the standard library
    import tomli as tomllib

DEFAULT_FILE = Path(__file__).resolve().parents[1] / "lab.toml"  # at the top of the package, where a course finds it
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")
# The class's similarity check (classroom/similarity.py): its thresholds, as measured by
# bench/similarity.py, and where a course keeps known solutions and the template it hands out.
SIMILARITY_KEYS = ("code", "behaviour", "known", "template")
CODE_THRESHOLD, BEHAVIOUR_THRESHOLD = 0.6, 0.3


class ConfigError(Exception):
    """A configuration that cannot be used; the message says where and why, in one line."""


@dataclass(frozen=True)
class SimilarityConfig:
    code: float = CODE_THRESHOLD  # a pair whose code score reaches this is similar
    behaviour: float = BEHAVIOUR_THRESHOLD  # ... or whose own words' score reaches this
    known: Optional[str] = None  # a folder of known solutions, relative to the configuration file
    template: Tuple[str, ...] = ()  # files of code every solution shares, relative to it too


@dataclass(frozen=True)
class LabConfig:
    profile: str = CORE
    lang: Optional[str] = None
    step_points: Dict[str, float] = field(default_factory=dict)
    clause_points: Dict[str, float] = field(default_factory=dict)
    visibility: Dict[str, str] = field(default_factory=dict)
    default_visibility: str = "visible"
    similarity: SimilarityConfig = field(default_factory=SimilarityConfig)
    seed: Optional[int] = None  # the draws of every grading (lab/draws.py); None: a new seed each

    def visibility_of(self, clause: str) -> str:
        step = CLAUSES[clause].step if clause in CLAUSES else ""
        return self.visibility.get(step, self.default_visibility)

    def most_points(self) -> float:
        """The lab's points in all: every step of the configuration's profile."""
        return round(sum(self.step_points.get(step, 0.0) for step in steps_for(self.profile)), 4)

    def worth_of_steps(self, steps: Iterable[str]) -> Dict[str, float]:
        """The most points each of `steps` can earn."""
        return {step: self.step_points.get(step, 0.0) for step in steps}

    def worth(self, clauses: Iterable[str]) -> Dict[str, float]:
        """The most points each of `clauses` (those graded) can earn: its own, or its share of
        what its step's points leave."""
        graded = set(clauses)
        worth: Dict[str, float] = {}
        for step in STEPS:
            in_step = [clause for clause in CLAUSES if clause in graded and CLAUSES[clause].step == step]
            own = {clause: self.clause_points[clause] for clause in in_step if clause in self.clause_points}
            left = max(0.0, self.step_points.get(step, 0.0) - sum(own.values()))
            worth.update(own)
            worth.update(_share(left, [clause for clause in in_step if clause not in own]))
        return worth


def differences(old: LabConfig, new: LabConfig) -> List[str]:
    """What a course changed from one configuration to the other, a line each (`points of S1: 3 ->
    6`), in the lab's order: what a teacher reviews before a regrade is published."""
    said = []
    for name, was, now in (
        ("profile", old.profile, new.profile),
        ("lang", old.lang, new.lang),
        ("seed", old.seed, new.seed),
    ):
        if was != now:
            said.append("%s: %s -> %s" % (name, "-" if was is None else was, "-" if now is None else now))
    for what, before, after in (
        ("points of step", old.step_points, new.step_points),
        ("points of clause", old.clause_points, new.clause_points),
        ("visibility of step", old.visibility, new.visibility),
    ):
        for key in sorted(set(before) | set(after), key=lambda key: (key not in STEPS, key)):
            if before.get(key) != after.get(key):
                said.append("%s %s: %s -> %s" % (what, key, _said(before.get(key)), _said(after.get(key))))
    if old.default_visibility != new.default_visibility:
        said.append("default visibility: %s -> %s" % (old.default_visibility, new.default_visibility))
    for key in SIMILARITY_KEYS:
        was, now = getattr(old.similarity, key), getattr(new.similarity, key)
        if was != now:
            shown = [", ".join(value) if isinstance(value, tuple) else value for value in (was, now)]
            said.append("similarity %s: %s -> %s" % (key, _said(shown[0] or None), _said(shown[1] or None)))
    return said


def _said(value: Any) -> str:
    return "-" if value is None else "%g" % value if isinstance(value, float) else str(value)


# Points are shown to 4 decimal places; a share is a whole number of these units.
POINT_UNIT = 10_000


def _share(points: float, clauses: List[str]) -> Dict[str, float]:
    """`points` split evenly over `clauses` in units of 1/POINT_UNIT, the remainder one unit each
    to the first ones in the lab's order: each share shows exactly, and the shares add up to
    `points` as shown (3 points over 7 clauses: 0.4286 five times and 0.4285 twice, not 7 x
    0.4286 = 3.0002)."""
    if not clauses:
        return {}
    units = round(points * POINT_UNIT)
    each, extra = divmod(units, len(clauses))
    return {clause: (each + (index < extra)) / POINT_UNIT for index, clause in enumerate(clauses)}


def load(path: Optional[Path] = None) -> LabConfig:
    """Read a configuration file (the shipped default when `path` is None)."""
    path = path or DEFAULT_FILE
    try:
        with open(str(path), "rb") as handle:
            data = tomllib.load(handle)
    except OSError as error:
        raise ConfigError("%s: cannot read it: %s" % (path, error.strerror)) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError("%s: not valid TOML: %s" % (path, error)) from None
    return parse(data, str(path))


def loads(text: str, where: str = "configuration") -> LabConfig:
    """A configuration from its text (as a class keeps it with its gradings)."""
    try:
        return parse(tomllib.loads(text), where)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError("%s: not valid TOML: %s" % (where, error)) from None


def parse(data: Mapping[str, Any], where: str = "configuration") -> LabConfig:
    unknown = sorted(set(data) - {"profile", "lang", "points", "visibility", "similarity", "seed"})
    if unknown:
        raise ConfigError(
            "%s: unknown setting %s (profile, lang, points, visibility, similarity, seed)" % (where, unknown[0])
        )
    seed = data.get("seed")
    if seed is not None and (type(seed) is not int or not 0 <= seed < 2**SEED_BITS):
        raise ConfigError("%s: seed = %r: a whole number from 0 to %d" % (where, seed, 2**SEED_BITS - 1))
    profile = data.get("profile", CORE)
    if profile not in PROFILES:
        raise ConfigError("%s: profile = %r: use one of %s" % (where, profile, ", ".join(PROFILES)))
    lang = data.get("lang")
    if lang is not None and lang not in LANGUAGES:
        raise ConfigError("%s: lang = %r: use one of %s" % (where, lang, ", ".join(LANGUAGES)))
    points = dict(data.get("points", {}))
    clause_points = points.pop("clause", {})
    step_points = {key: _points(where, "points." + key, key, value, STEPS) for key, value in points.items()}
    clause_points = {
        key: _points(where, 'points.clause."%s"' % key, key, value, list(CLAUSES))
        for key, value in clause_points.items()
    }
    for clause, value in clause_points.items():
        step = CLAUSES[clause].step
        taken = sum(v for c, v in clause_points.items() if CLAUSES[c].step == step)
        if taken > step_points.get(step, 0.0):
            raise ConfigError(
                '%s: points.clause."%s" = %g: the clauses of %s take %g points, more than the step\'s %g'
                % (where, clause, value, step, taken, step_points.get(step, 0.0))
            )
    visibility = dict(data.get("visibility", {}))
    default = visibility.pop("default", "visible")
    for key, value in [("default", default)] + list(visibility.items()):
        if key != "default" and key not in STEPS:
            raise ConfigError("%s: visibility.%s: no such step (%s)" % (where, key, ", ".join(STEPS)))
        if value not in VISIBILITIES:
            raise ConfigError("%s: visibility.%s = %r: use one of %s" % (where, key, value, ", ".join(VISIBILITIES)))
    similarity = _similarity(where, data.get("similarity", {}))
    return LabConfig(profile, lang, step_points, clause_points, visibility, default, similarity, seed)


def _similarity(where: str, table: Any) -> SimilarityConfig:
    if not isinstance(table, dict):
        raise ConfigError("%s: similarity: a table ([similarity]) of %s" % (where, ", ".join(SIMILARITY_KEYS)))
    unknown = sorted(set(table) - set(SIMILARITY_KEYS))
    if unknown:
        raise ConfigError("%s: similarity.%s: no such setting (%s)" % (where, unknown[0], ", ".join(SIMILARITY_KEYS)))
    thresholds = {}
    for key, default in (("code", CODE_THRESHOLD), ("behaviour", BEHAVIOUR_THRESHOLD)):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            raise ConfigError(
                "%s: similarity.%s = %r: a threshold is a number above 0, at most 1" % (where, key, value)
            )
        thresholds[key] = float(value)
    known = table.get("known")
    if known is not None and (not isinstance(known, str) or not known):
        raise ConfigError("%s: similarity.known = %r: a folder's path" % (where, known))
    template = table.get("template", [])
    template = [template] if isinstance(template, str) else template
    if not isinstance(template, list) or not all(isinstance(path, str) and path for path in template):
        raise ConfigError("%s: similarity.template = %r: a file's path, or a list of them" % (where, template))
    return SimilarityConfig(thresholds["code"], thresholds["behaviour"], known, tuple(template))


def _points(where: str, name: str, key: str, value: Any, known: List[str]) -> float:
    if key not in known:
        raise ConfigError("%s: %s: no such %s" % (where, name, "clause" if "clause" in name else "step"))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError("%s: %s = %r: points are a number, 0 or more" % (where, name, value))
    return float(value)
