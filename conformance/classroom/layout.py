"""The names a class folder uses at its top: the class's own files, and nothing else but students.

    DIR/.pyops-class     the mark of a folder this tool made (store.py)
    DIR/grades.csv       the published generation's grades (store.py)
    DIR/report.html      the published generation's class report (store.py, drawn by batch.py)
    DIR/similarity.csv   the published generation's pairs of runners compared (similarity.py)
    DIR/similarity-cache.json    their code scores, per pair of submissions' sha256 (similarity.py)
    DIR/history.csv      each student's published grades, generation after generation (generations.py)
    DIR/regrade.csv      the generation pending review against the published one (generations.py)
    DIR/regrade.html     the same, for a teacher to review (generations.py)
    DIR/generations/     every generation, and generations/state.json (generations.py)
    DIR/STUDENT/         a student's files (store.py): every other name

A generation folder, DIR/generations/N/, is a class folder of its own with the same names. A
student is named by a submission (`history.csv.py` is the student "history.csv"), so a student
who took one of these names would have their files written over the class's, or the class's over
theirs: such a submission is not taken (discover.py), and the store makes no folder for it. Names
are compared case-insensitively: a class folder copied to a file system that ignores case (a
teacher's laptop) must not have two of them become one.

Every name the class writes at its top is here, and is written by taking it from here: a new file
of the class is a new name here, out of every student's reach from the start. A hidden name (the
mark, the temporary files report.write_atomically writes through) is never a student's: discovery skips
hidden entries.
"""

MARK = ".pyops-class"
GRADES = "grades.csv"
REPORT = "report.html"
SIMILARITY = "similarity.csv"
SIMILARITY_CACHE = "similarity-cache.json"  # code scores per pair of submissions (similarity.py)
HISTORY = "history.csv"
REGRADE_CSV = "regrade.csv"
REGRADE_HTML = "regrade.html"
GENERATIONS = "generations"
# In DIR/generations/, beside the generations' folders (named by their numbers).
STATE = "state.json"

# The published generation's files, copied to the class folder's top when it is published.
PUBLISHED_FILES = (GRADES, REPORT, SIMILARITY)
# What a pending generation is reviewed with; gone once nothing is pending.
REGRADE_FILES = (REGRADE_CSV, REGRADE_HTML)
NAMES = frozenset({MARK, GRADES, REPORT, SIMILARITY, SIMILARITY_CACHE, HISTORY, REGRADE_CSV, REGRADE_HTML, GENERATIONS})
_FOLDED = frozenset(name.casefold() for name in NAMES)


def is_class_name(name: str) -> bool:
    """Is `name` one of the class folder's own names, in any case?"""
    return name.casefold() in _FOLDED


def is_student_folder_name(name: str) -> bool:
    """May an entry of this name at a class folder's top be a student's folder?"""
    return not name.startswith(".") and not is_class_name(name)
