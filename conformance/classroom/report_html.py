"""The class report: one self-contained HTML page over a whole class's gradings.

A lab author reads it after grading a class: how the scores spread, which clauses the class
missed, who missed what, and which failures to explain in the next class. The page opens from
disk with nothing else (no script, no network, no external style or font): charts are inline SVG
or plain HTML bars drawn here. Student names and messages come from untrusted submissions, so
every string taken from the data goes through `_e` (inert.py's escapes, then html.escape), and the
page's Content Security Policy forbids scripts altogether should one ever slip through.
"""

import html
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from conformance.harness.inert import inert
from conformance.judging import verdicts
from conformance.lab.clauses import CLAUSES

GRADED = "graded"
# The statuses a grading ends in, always counted in the header (zeros too: "no timeout" is news).
STATUSES = (GRADED, "error", "timeout")
# The most frequent failures listed: enough for a class's worth of explaining, short enough to read.
TOP_FAILURES = 15
# Score bands of the histogram, in percent of max_score: ten bands of 10, then full marks apart,
# because a lab's scores pile up at 100 % and a 90-100 band would hide who still lost a point.
BANDS: List[Tuple[int, int]] = [(low, low + 10) for low in range(0, 100, 10)] + [(100, 101)]

# Cell states of the heat map: (label in the legend, background). A light green, so the eye goes to
# what failed. Glyphs in the cells (a number, a cross) say the same as the colours, for readers who
# cannot tell green from red, and on paper.
# A clause blocked by another one's failure (verdicts.py) is set apart: not this clause's mistake.
PASSED, SOME, ALL_FAILED, BLOCKED, NOT_GRADED = "passed", "some", "failed", "blocked", "none"
STATES = {
    PASSED: ("all checks passed", "#7cc691"),
    SOME: ("some checks failed", "#f2a541"),
    ALL_FAILED: ("all checks failed", "#d6453d"),
    BLOCKED: ("blocked by another clause's failure", "#8fa3bf"),
    NOT_GRADED: ("not graded", "repeating-linear-gradient(45deg, #e4e4e4 0 4px, #f3f3f3 4px 8px)"),
}

_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif;
       color: #222; background: #fff; margin: 0; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 24px; margin: 0 0 12px; }
h2 { font-size: 18px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 1px solid #ddd; }
.muted { color: #666; }
.empty { color: #666; font-style: italic; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 110px; }
.card dt { font-size: 12px; color: #666; }
.card dd { margin: 0; font-size: 20px; font-weight: 600; }
svg text { font-family: inherit; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 0.9em; }
ul.apart { margin: 6px 0 0; padding-left: 20px; }
table.rates { border-collapse: collapse; width: 100%; }
table.rates td, table.rates th { padding: 3px 8px; border-bottom: 1px solid #eee; vertical-align: middle; }
table.rates th { text-align: left; font-weight: 600; white-space: nowrap; }
table.rates td.what { width: 48%; }
table.rates td.bar { width: 32%; }
table.rates td.num { white-space: nowrap; text-align: right; font-variant-numeric: tabular-nums; }
.track { background: #eef0f3; border-radius: 3px; height: 14px; }
.fill { background: #3f6fb5; border-radius: 3px; height: 14px; }
.scroll { overflow-x: auto; }
table.heat { border-collapse: separate; border-spacing: 2px; font-size: 12px; }
table.heat th { font-weight: 600; white-space: nowrap; }
table.heat thead th { text-align: center; color: #444; }
table.heat thead tr.steps th { border-bottom: 2px solid #bbb; }
table.heat tbody th { text-align: left; padding-right: 8px; max-width: 180px; overflow: hidden;
                      text-overflow: ellipsis; }
table.heat td.cell { width: 26px; height: 20px; text-align: center; border-radius: 3px; color: #fff;
                     font-weight: 700; }
table.heat td.score { text-align: right; padding-left: 8px; font-variant-numeric: tabular-nums; }
table.heat td.some { color: #222; }
table.heat .step-start { border-left: 4px solid #fff; }
.badge { display: inline-block; font-size: 11px; font-weight: 600; padding: 0 5px; border-radius: 3px;
         background: #666; color: #fff; margin-left: 4px; }
.legend { display: flex; gap: 16px; flex-wrap: wrap; margin: 4px 0 10px; font-size: 12px; }
.legend .swatch { display: inline-block; width: 14px; height: 14px; border-radius: 3px; vertical-align: -3px;
                  margin-right: 5px; }
ol.failures { padding-left: 24px; }
ol.failures li { margin: 0 0 14px; }
ol.failures .line { display: block; font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 13px;
                    background: #f6f6f6; border-left: 3px solid #d6453d; padding: 4px 8px; margin: 3px 0;
                    white-space: pre-wrap; overflow-wrap: anywhere; }
ol.failures .who { color: #444; overflow-wrap: anywhere; }
.pair { border: 1px solid #ddd; border-radius: 6px; margin: 0 0 12px; padding: 6px 12px; }
.pair summary { cursor: pointer; font-weight: 600; overflow-wrap: anywhere; }
.pair .scores { font-weight: 400; color: #444; margin-left: 8px; font-variant-numeric: tabular-nums; }
.sides { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 10px; margin: 8px 0; }
.sides h4 { margin: 0 0 4px; font-size: 13px; overflow-wrap: anywhere; }
.sides pre { margin: 0; font: 12px/1.35 ui-monospace, "DejaVu Sans Mono", monospace; background: #f8f8f8;
             padding: 6px; overflow-x: auto; max-height: 480px; overflow-y: auto; }
.sides .ln { color: #999; display: inline-block; min-width: 3em; user-select: none; }
.sides .gap { color: #999; }
mark { background: #ffe08a; color: inherit; }
ul.words { margin: 4px 0; padding-left: 20px; font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; }
"""


def render(
    students: Sequence[Mapping],
    title: str = "pyops lab: class report",
    generation: Optional[Mapping] = None,
    similar: Any = None,
) -> str:
    """The whole report as one HTML document; `generation` says which of the class folder's
    generations it shows ({"number", "suite", "configuration"}, generations.py); `similar` is the
    similarity check's outcome (similarity.Outcome) or why it was not computed (no section: None)."""
    clauses = clauses_of(students)
    roster = sorted(students, key=lambda student: (_name(student).casefold(), _name(student)))
    sections = [
        _header(students, title, generation),
        _histogram(students),
        _pass_rates(students, clauses),
        heat_map(roster, clauses),
        _frequent_failures(students, clauses),
    ]
    if similar is not None:
        sections.append(similarity_section(similar))
    return document(title, sections)


def document(title: str, sections: Sequence[str]) -> str:
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            # No script may run, whatever a submission managed to put in the page; styles are inline.
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            "<title>%s</title>" % _e(title),
            "<style>%s%s</style>"
            % (_STYLE, "".join(".%s { background: %s; }\n" % (state, css) for state, (_, css) in STATES.items())),
            "</head>",
            "<body>",
            "<main>",
        ]
        + list(sections)
        + ["</main>", "</body>", "</html>", ""]
    )


def render_regrade(
    changed: Sequence[Mapping],
    students: int,
    old: int,
    new: int,
    configuration: Sequence[str] = (),
    suites: Sequence[str] = ("unknown", "unknown"),
    grading: Sequence[str] = (),
) -> str:
    """regrade.html: what publishing generation `new` over `old` would change: the suite of each
    (version and fingerprint) and how the grading changed (`grading`: the suite, the interpreter,
    the language, a line each with what it made run again), the configuration (a line per change),
    per clause (how many students' verdicts move which way) and per student (why the score moves,
    each changed clause with both messages; a score moved by points alone says so)."""
    moves: Dict[str, Dict[str, int]] = {}
    for entry in changed:
        for change in entry["clauses"]:
            way = "%s -> %s" % (change["old"], change["new"])
            moves.setdefault(change["clause"], {}).setdefault(way, 0)
            moves[change["clause"]][way] += 1
    title = "pyops lab: regrade, generation %d against published %d" % (new, old)
    summary = (
        '<header><h1>%s</h1><p class="sub" data-changed="%d" data-students="%d">%d of %d submissions change. '
        "Nothing is published until you approve (class ... --approve).</p></header>"
        % (_e(title), len(changed), students, len(changed), students)
    )
    rows = "".join(
        '<tr data-clause="%s"><th>%s</th><td>%s</td></tr>'
        % (_e(clause), _e(clause), _e(", ".join("%s: %d" % (way, count) for way, count in sorted(ways.items()))))
        for clause, ways in sorted(moves.items())
    )
    by_clause = (
        '<section id="by-clause"><h2>By clause</h2><table><tr><th>clause</th><th>students, by change</th></tr>'
        "%s</table></section>" % rows
    )
    settings = '<section id="configuration" data-changes="%d"><h2>Configuration</h2>%s</section>' % (
        len(configuration),
        "<ul>%s</ul>" % "".join("<li>%s</li>" % _e(line) for line in configuration)
        if configuration
        else "<p>unchanged, or not known for the published generation</p>",
    )
    suite = (
        '<section id="suite"><h2>Suite and grading</h2><ul><li>published generation %d: pyops-lab <code>%s</code></li>'
        "<li>generation %d: pyops-lab <code>%s</code></li>%s</ul></section>"
        % (old, _e(suites[0]), new, _e(suites[1]), "".join("<li>%s</li>" % _e(line) for line in grading))
    )
    people = []
    for entry in changed:
        why = "".join("<li>%s</li>" % _e(reason) for reason in entry.get("why", ()))
        items = (
            "".join(
                "<li><b>%s</b> %s &rarr; %s<pre>was: %s</pre><pre>now: %s</pre></li>"
                % (
                    _e(change["clause"]),
                    _e(change["old"]),
                    _e(change["new"]),
                    _e(change["old_message"] or "-"),
                    _e(change["new_message"] or "-"),
                )
                for change in entry["clauses"]
            )
            or "<li>the same verdicts: the score moves with the configuration's points</li>"
        )
        people.append(
            '<article data-student="%s"><h3>%s: %s &rarr; %s</h3><p>why:</p><ul class="why">%s</ul><ul>%s</ul>'
            "</article>"
            % (
                _e(entry["student"]),
                _e(entry["student"]),
                _e(entry["old_score"]),
                _e(entry["new_score"]),
                why,
                items,
            )
        )
    by_student = '<section id="by-student"><h2>By student</h2>%s</section>' % "".join(people)
    return document(title, [summary, suite, settings, by_clause, by_student])


# --- the data, read once the same way by every section ---------------------------------------------


def _e(value: object) -> str:
    """Text for HTML, in an element or an attribute: every string from the data goes through here.

    A control character or a bidirectional override (one in a student's folder name would show the
    rest of the name reversed) is shown as its escape, `\\u202e`, not obeyed."""
    return html.escape(inert(str(value)), quote=True)


escape = _e  # for the other pages drawn with this module's parts (selftest's report)


def _name(student: Mapping) -> str:
    return str(student.get("student") or "(no name)")


def _graded(students: Sequence[Mapping]) -> List[Mapping]:
    return [student for student in students if student.get("status") == GRADED]


def _fraction(student: Mapping) -> Optional[float]:
    """The score as a fraction of max_score; None when there is none to speak of."""
    score, most = student.get("score"), student.get("max_score")
    if student.get("status") != GRADED or score is None or not most:
        return None
    return float(score) / float(most)


def clauses_of(students: Sequence[Mapping]) -> List[str]:
    """The clauses any student was checked on, in the lab's order (unknown IDs last, sorted)."""
    seen = {test.get("clause") for student in students for test in student.get("tests") or ()}
    seen.discard(None)  # a check without a clause is the suite's own; it belongs to no column
    known = [clause for clause in CLAUSES if clause in seen]
    return known + sorted(str(clause) for clause in seen if clause not in CLAUSES)


def _outcomes(student: Mapping) -> Dict[str, List[str]]:
    """Each clause's check outcomes for one student."""
    by_clause: Dict[str, List[str]] = {}
    for test in student.get("tests") or ():
        if test.get("clause") is not None:
            by_clause.setdefault(str(test["clause"]), []).append(str(test.get("outcome")))
    return by_clause


def _state(outcomes: Sequence[str]) -> str:
    """A clause's state for one student. Only "passed" passes: a skipped or errored check did not
    show the clause holds, as in the suite's own step verdicts."""
    if not outcomes:
        return NOT_GRADED
    passed = sum(outcome == "passed" for outcome in outcomes)
    if passed == len(outcomes):
        return PASSED
    return ALL_FAILED if passed == 0 else SOME


def _clause_html(clause: str) -> str:
    """A clause's English text, its `code` spans as code (the texts are the lab's, written in Markdown)."""
    parts = _e(CLAUSES[clause].text_en if clause in CLAUSES else "").split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: leave the text as it is
        return "`".join(parts)
    return "".join("<code>%s</code>" % part if odd else part for odd, part in zip([False, True] * len(parts), parts))


def _percent(fraction: float) -> str:
    return "%.0f%%" % (100 * fraction)


def _number(value: float) -> str:
    """A score without a useless ".0"."""
    return ("%.1f" % value).rstrip("0").rstrip(".")


def _plural(count: int, word: str) -> str:
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def _statuses(students: Sequence[Mapping]) -> Dict[str, int]:
    """How many ended in each status: graded, error, timeout, then any other (a newer grader's) by name."""
    seen = sorted({str(student.get("status")) for student in students} - set(STATUSES))
    return {
        status: sum(str(student.get("status")) == status for student in students) for status in STATUSES + tuple(seen)
    }


def section(anchor: str, heading: str, body: List[str]) -> str:
    return "\n".join(['<section id="%s">' % anchor, "<h2>%s</h2>" % heading] + body + ["</section>"])


NO_GRADED = '<p class="empty">no graded submissions</p>'


# --- the sections ------------------------------------------------------------------------------------


def _header(students: Sequence[Mapping], title: str, generation: Optional[Mapping] = None) -> str:
    """The title, which generation this is, then the class in numbers: its size, how many ended in
    each status, mean and median."""
    fractions = [f for f in map(_fraction, _graded(students)) if f is not None]
    cards = [("students", str(len(students)))]
    cards += [(status, str(count)) for status, count in _statuses(students).items()]
    if fractions:
        cards.append(("mean score", _percent(statistics.mean(fractions))))
        cards.append(("median score", _percent(statistics.median(fractions))))
    maxima = {student.get("max_score") for student in _graded(students)}
    points = ""
    if len(maxima) == 1 and fractions:
        # One configuration for all: the scores also read in the lab's points.
        most = float(maxima.pop() or 0)
        points = '<p class="muted">scores out of %s points: mean %s, median %s</p>' % (
            _e(_number(most)),
            _e(_number(statistics.mean(fractions) * most)),
            _e(_number(statistics.median(fractions) * most)),
        )
    body = ['<header id="summary">', "<h1>%s</h1>" % _e(title)]
    if generation:
        body.append(_generation(generation))
    body.append('<dl class="cards">')
    for label, value in cards:
        body.append('<div class="card" data-card="%s"><dt>%s</dt><dd>%s</dd></div>' % (_e(label), _e(label), _e(value)))
    body.append("</dl>")
    body.append(points if fractions else NO_GRADED)
    body.append("</header>")
    return "\n".join(body)


def _generation(generation: Mapping) -> str:
    """Which generation of the class folder this page shows, what graded it, and what a generation
    is: a teacher who finds two reports of one class can tell them apart, and a student's grade
    can be traced to the suite and configuration that gave it."""
    known = [
        "<b>generation %s</b>" % _e(str(generation.get("number", "?"))),
        "suite <code>%s</code>" % _e(_short(generation.get("suite"))),
        "configuration <code>%s</code>" % _e(_short(generation.get("configuration"))),
    ]
    return (
        '<p id="generation" data-generation="%s">%s. '
        '<span class="muted">Each grading of this class with another suite or configuration is a new '
        "generation, kept in <code>generations/</code>: it is published only once its "
        "<code>regrade.html</code> is reviewed (<code>class ... --approve</code>), and "
        "<code>--rollback</code> shows the one before again; <code>history.csv</code> keeps every "
        "student's published grades.</span></p>" % (_e(str(generation.get("number", ""))), " · ".join(known))
    )


def _short(digest: object) -> str:
    """A sha256 as people compare them by eye: its first 12 digits ("unknown" for a generation
    adopted from a class folder graded before generations)."""
    return str(digest)[:12] if digest else "unknown"


def _histogram(students: Sequence[Mapping]) -> str:
    """Students per score band, as an SVG bar chart; those not graded get bars of their own, apart,
    since they have no score to put in a band (a timeout is not a zero)."""
    if not students:
        return section("histogram", "Scores", [NO_GRADED])
    counts = [0] * len(BANDS)
    for fraction in [f for f in map(_fraction, students) if f is not None]:
        percent = min(max(int(100 * fraction + 1e-9), 0), 100)  # 1e-9: 0.7 * 100 is 69.99...
        counts[next(i for i, (low, high) in enumerate(BANDS) if low <= percent < high)] += 1
    apart = {status: n for status, n in _statuses(students).items() if status != GRADED and n}
    bars = [
        ("%d–%d" % (low, high - 1) if high - low > 1 else "%d" % low, n, "band")
        for (low, high), n in zip(BANDS, counts)
    ]
    bars += [(status, n, "apart") for status, n in apart.items()]

    height, left, top, bottom, bar, gap = 260, 40, 20, 44, 52, 12
    extra = 24 if apart else 0  # a wider gap before the bars that are not score bands
    width = left + gap + len(bars) * (bar + gap) + extra
    tallest = max([n for _, n, _ in bars] + [1])
    step = max(1, -(-tallest // 5))  # at most about five gridlines, on whole students
    scale = (height - top - bottom) / float(step * -(-tallest // step))
    base = height - bottom
    svg = [
        '<svg class="histogram" role="img" width="%d" height="%d" viewBox="0 0 %d %d" '
        'aria-label="students per score band">' % (width, height, width, height)
    ]
    for tick in range(0, tallest + step, step):
        y = base - tick * scale
        svg.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e3e3e3"/>' % (left, width, y, y))
        svg.append(
            '<text x="%d" y="%.1f" font-size="11" fill="#777" text-anchor="end">%d</text>' % (left - 6, y + 4, tick)
        )
    x = left + gap
    for index, (label, n, kind) in enumerate(bars):
        if kind == "apart" and bars[index - 1][2] == "band":
            x += extra
            svg.append(
                '<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#bbb" stroke-dasharray="3 3"/>'
                % (x - gap, x - gap, top, base + 30)
            )
        colour = "#3f6fb5" if kind == "band" else "#8a8a8a"
        what = "%s%%" % label if kind == "band" else label
        svg.append(
            '<g data-%s="%s" data-count="%d"><title>%s: %s</title>'
            % ("band" if kind == "band" else "status", _e(label), n, _e(what), _e(_plural(n, "student")))
        )
        svg.append(
            '<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="%s" rx="2"/>'
            % (x, base - n * scale, bar, n * scale, colour)
        )
        if n:
            svg.append(
                '<text x="%d" y="%.1f" font-size="12" font-weight="600" text-anchor="middle">%d</text>'
                % (x + bar / 2, base - n * scale - 5, n)
            )
        svg.append(
            '<text x="%d" y="%d" font-size="11" fill="#444" text-anchor="middle">%s</text></g>'
            % (x + bar / 2, base + 16, _e(label))
        )
        x += bar + gap
    svg.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#888"/>' % (left, width, base, base))
    middle = left + gap + len(BANDS) * (bar + gap) / 2
    svg.append(
        '<text x="%d" y="%d" font-size="12" fill="#555" text-anchor="middle">score, %% of the max score</text>'
        % (middle, base + 36)
    )
    svg.append("</svg>")

    body = ["\n".join(svg)]
    if not _graded(students):
        body.append(NO_GRADED)
    if apart:
        body.append(
            '<p class="muted">Not in the score bands (no score to count): %s.</p>'
            % _e(", ".join("%d %s" % (n, status) for status, n in apart.items()))
        )
        body.append('<ul class="apart">')
        for student in sorted(students, key=lambda s: _name(s).casefold()):
            if student.get("status") != GRADED:
                body.append(
                    '<li><b>%s</b> <span class="badge">%s</span> %s</li>'
                    % (_e(_name(student)), _e(student.get("status")), _e(student.get("message") or ""))
                )
        body.append("</ul>")
    return section("histogram", "Scores", body)


def _pass_rates(students: Sequence[Mapping], clauses: Sequence[str]) -> str:
    """Each clause's pass rate: graded students who passed every check of it, over students graded."""
    graded = _graded(students)
    if not graded or not clauses:
        return section("pass-rates", "Pass rate per clause", [NO_GRADED])
    states = [_outcomes(student) for student in graded]
    body = [
        '<p class="muted">Students who passed every check of the clause, out of the %s graded.</p>'
        % _plural(len(graded), "student"),
        '<table class="rates">',
    ]
    for clause in clauses:
        passed = sum(_state(outcomes.get(clause, ())) == PASSED for outcomes in states)
        rate = passed / float(len(graded))
        body.append(
            '<tr data-clause="%s" data-passed="%d" data-graded="%d"><th>%s</th><td class="what">%s</td>'
            '<td class="bar"><div class="track"><div class="fill" style="width: %.1f%%"></div></div></td>'
            '<td class="num">%d/%d &nbsp;<b>%s</b></td></tr>'
            % (
                _e(clause),
                passed,
                len(graded),
                _e(clause),
                _clause_html(clause),
                100 * rate,
                passed,
                len(graded),
                _percent(rate),
            )
        )
    body.append("</table>")
    return section("pass-rates", "Pass rate per clause", body)


def heat_map(
    roster: Sequence[Mapping], clauses: Sequence[str], heading: str = "Students × clauses", who: str = "student"
) -> str:
    """Students down, clauses across: who missed what. Each cell's tooltip says it in words."""
    if not _graded(roster) or not clauses:
        return section("heat-map", heading, [NO_GRADED])
    legend = "".join(
        '<span><span class="swatch %s"></span>%s</span>' % (state, label) for state, (label, _) in STATES.items()
    )
    # The step over its clauses, and a gap before each step's first column, so the columns read as
    # the lab's steps.
    groups: List[Tuple[str, int]] = []
    starts = set()
    for clause in clauses:
        step = CLAUSES[clause].step if clause in CLAUSES else "?"
        if groups and groups[-1][0] == step:
            groups[-1] = (step, groups[-1][1] + 1)
        else:
            groups.append((step, 1))
            starts.add(clause)
    gap = {clause: " step-start" if clause in starts else "" for clause in clauses}
    body = [
        '<div class="legend">%s<span class="muted">(a number: how many checks did not pass; '
        "hover a cell for details)</span></div>" % legend,
        '<div class="scroll"><table class="heat">',
        '<thead><tr class="steps"><th></th>'
        + "".join('<th class="step-start" colspan="%d">%s</th>' % (n, _e(step)) for step, n in groups)
        + "<th></th></tr>",
        "<tr><th>%s</th>" % _e(who)
        + "".join(
            '<th class="%s" title="%s: %s">%s</th>'
            % (gap[c], _e(c), _e(CLAUSES[c].text_en if c in CLAUSES else ""), _e(c.split(".")[-1]))
            for c in clauses
        )
        + '<th class="score">score</th></tr></thead>',
        "<tbody>",
    ]
    for student in roster:
        name = _name(student)
        outcomes = _outcomes(student)
        judged = verdicts.of_tests(student.get("tests") or ())
        status = str(student.get("status"))
        badge = "" if status == GRADED else ' <span class="badge">%s</span>' % _e(status)
        row = ['<tr data-student="%s"><th title="%s">%s%s</th>' % (_e(name), _e(name), _e(name), badge)]
        for clause in clauses:
            checks = outcomes.get(clause, [])
            state = _state(checks)
            missed = sum(outcome != "passed" for outcome in checks)
            glyph = {SOME: str(missed), ALL_FAILED: "✗"}.get(state, "")
            tooltip = _tooltip(name, status, clause, checks)
            entry = judged.get(clause) or {}
            if entry.get("verdict") == verdicts.BLOCKED:
                state, glyph = BLOCKED, "–"
                tooltip = "%s %s: blocked by %s" % (name, clause, ", ".join(entry["blocked_by"]))
            row.append(
                '<td class="cell %s%s" data-clause="%s" title="%s">%s</td>'
                % (state, gap[clause], _e(clause), _e(tooltip), glyph)
            )
        fraction = _fraction(student)
        row.append('<td class="score">%s</td></tr>' % ("–" if fraction is None else _percent(fraction)))
        body.append("".join(row))
    body.append("</tbody></table></div>")
    return section("heat-map", heading, body)


def _tooltip(name: str, status: str, clause: str, outcomes: Sequence[str]) -> str:
    """e.g. "alice S2.4: 1 of 3 checks failed"; outcomes other than failed are named, not called failures."""
    if not outcomes:
        return "%s %s: not graded%s" % (name, clause, "" if status == GRADED else " (%s)" % status)
    missed = [outcome for outcome in outcomes if outcome != "passed"]
    if not missed:
        return "%s %s: all %s passed" % (name, clause, _plural(len(outcomes), "check"))
    if all(outcome == "failed" for outcome in missed):
        return "%s %s: %d of %s failed" % (name, clause, len(missed), _plural(len(outcomes), "check"))
    kinds = ", ".join("%d %s" % (missed.count(kind), kind) for kind in sorted(set(missed)))
    return "%s %s: %d of %s did not pass (%s)" % (name, clause, len(missed), _plural(len(outcomes), "check"), kinds)


def _gist(message: str, clause: str) -> str:
    """The line of a failure message that says what went wrong: its first line, past the "[S2.4] ..."
    heading every clause failure starts with (that only repeats the clause, shown beside it anyway,
    and would lump every failure of a clause together)."""
    lines = [line.strip() for line in str(message or "").splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].startswith("[%s]" % clause):
        lines = lines[1:]
    return lines[0] if lines else "(no message)"


def _frequent_failures(students: Sequence[Mapping], clauses: Sequence[str]) -> str:
    """Failed checks grouped by clause and what went wrong, the most widely shared first: what to
    explain in the next class. Counted in students, not checks, so one runner failing a clause's
    many checks the same way does not outweigh a mistake half the class made."""
    who: Dict[Tuple[str, str], Set[str]] = {}
    checks: Dict[Tuple[str, str], int] = {}
    # Causes only: each failed clause of a student once, by its cause (verdicts.py). A blocked
    # clause is another one's cascade, and an "error" the suite's or the machine's problem:
    # nothing to teach.
    for student in _graded(students):
        for clause, entry in verdicts.of_tests(student.get("tests") or ()).items():
            if entry["verdict"] == verdicts.FAILED:
                key = (clause, _gist(entry.get("message") or "", clause))
                who.setdefault(key, set()).add(_name(student))
                checks[key] = checks.get(key, 0) + 1 + len(entry.get("also_seen") or ())
    heading = "Most frequent failures"
    if not _graded(students):
        return section("failures", heading, [NO_GRADED])
    if not who:
        return section("failures", heading, ['<p class="empty">no check failed</p>'])
    order = {clause: index for index, clause in enumerate(clauses)}
    ranked = sorted(who, key=lambda key: (-len(who[key]), -checks[key], order.get(key[0], len(order)), key[1]))
    shown = "; the %d most shared of %d" % (TOP_FAILURES, len(ranked)) if len(ranked) > TOP_FAILURES else ""
    body = [
        '<p class="muted">Failed clauses grouped by their cause (what the first check that showed it says went '
        "wrong; clauses blocked by another's failure are not counted), the most widely shared first%s.</p>" % shown,
        '<ol class="failures">',
    ]
    for key in ranked[:TOP_FAILURES]:
        clause, line = key
        names = sorted(who[key], key=lambda name: (name.casefold(), name))
        body.append(
            '<li data-clause="%s" data-students="%d" data-checks="%d"><b>%s</b> %s &middot; <b>%s</b>, %s'
            '<span class="line">%s</span><span class="who">%s</span></li>'
            % (
                _e(clause),
                len(names),
                checks[key],
                _e(clause),
                _clause_html(clause),
                "%d of %s" % (len(names), _plural(len(_graded(students)), "student")),
                _plural(checks[key], "check"),
                _e(line),
                ", ".join(_e(name) for name in names),
            )
        )
    body.append("</ol>")
    return section("failures", heading, body)


# Pairs drawn with their side-by-side view; the others are in similarity.csv.
SHOWN_PAIRS = 40


def similarity_section(similar: Any) -> str:
    """Pairs of runners alike, the most similar first: both scores, the matching code side by side
    (highlighted) and the words both say. It says "similar": the teacher decides what it means."""
    from conformance.classroom import similarity

    heading = "Similar runners"
    if isinstance(similar, str):
        return section("similarity", heading, ['<p class="empty">%s</p>' % _e(similar)])
    pairs = similar.similar
    body = [
        '<p class="muted" data-compared="%d" data-others="%d" data-similar="%d">%s submissions compared in pairs, '
        "and each with %s (the reference, the styles of <code>runner/styles</code> and any known solutions). A pair "
        "is shown when its <b>code</b> score (copydetect's winnowing: names, strings, comments and layout left "
        "out) reaches %.2f or its <b>behaviour</b> score (the words the runners print and write, the lab's own "
        "left out) reaches %.2f. Similar is not copied: read both sides, then decide. Every pair is in "
        "<code>similarity.csv</code>.</p>"
        % (
            similar.runners,
            similar.others,
            len(pairs),
            _e(similar.runners),
            _e(_plural(similar.others, "other runner")),
            similar.code_threshold,
            similar.behaviour_threshold,
        )
    ]
    if not pairs:
        body.append('<p class="empty">no pair reaches a threshold</p>')
    for index, pair in enumerate(pairs[:SHOWN_PAIRS]):
        body.append(_pair(pair, similarity, opened=index < 3))
    if len(pairs) > SHOWN_PAIRS:
        body.append(
            '<p class="muted">%d more similar pairs: see <code>similarity.csv</code>.</p>' % (len(pairs) - SHOWN_PAIRS)
        )
    return section("similarity", heading, body)


def _pair(pair: Any, similarity: Any, opened: bool) -> str:
    first, second = pair.first, pair.second
    scores = "code %.2f · behaviour %.2f (%s in common)" % (
        pair.code,
        pair.behaviour,
        _plural(len(pair.shared), "word"),
    )
    sides = []
    for runner, share, ranges in (
        (first, pair.code_sides[0], pair.slices[0]),
        (second, pair.code_sides[1], pair.slices[1]),
    ):
        lines = similarity.shown_lines(runner.text, ranges)
        drawn = []
        for number, pieces in lines:
            if number is None:
                drawn.append('<span class="gap">⋮</span>')
                continue
            text = "".join("<mark>%s</mark>" % _e(piece) if hit else _e(piece) for piece, hit in pieces)
            drawn.append('<span class="ln">%d</span>%s' % (number, text))
        sides.append(
            '<div><h4>%s <span class="muted">%.0f%% of its code matches</span></h4><pre>%s</pre></div>'
            % (_e(runner.label), 100 * share, "\n".join(drawn) or "(no matching code)")
        )
    words = "".join("<li>%s</li>" % _e(first.words.get(word, word)) for word in pair.shared[: similarity.SHOWN_WORDS])
    more = len(pair.shared) - similarity.SHOWN_WORDS
    said = (
        '<p class="muted">Words both say (beyond the lab\'s own)%s:</p><ul class="words">%s</ul>'
        % (" , the first %d of %d" % (similarity.SHOWN_WORDS, len(pair.shared)) if more > 0 else "", words)
        if words
        else '<p class="muted">No words in common beyond the lab\'s own.</p>'
    )
    return (
        '<details class="pair" data-first="%s" data-second="%s" data-kind="%s" data-code="%.2f" '
        'data-behaviour="%.2f"%s><summary>%s &harr; %s<span class="scores">%s</span></summary>'
        '<div class="sides">%s</div>%s</details>'
        % (
            _e(first.name),
            _e(second.name),
            _e(second.kind),
            pair.code,
            pair.behaviour,
            " open" if opened else "",
            _e(first.label),
            _e(second.label),
            _e(scores),
            "".join(sides),
            said,
        )
    )
