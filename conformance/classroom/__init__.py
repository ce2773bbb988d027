"""Grading a whole class: a folder of submissions, one grading each, a class store and report.

The flow goes one way: discover (who submitted what) -> a queue (a local pool, or Celery tasks on
other machines) -> grading (the suite's CLI on one runner.py) -> the store (each student's
reports, resume keys, grades.csv) -> the class report. Nothing here reaches into the harness:
it reads the suite's JSON report, the one contract.
"""
