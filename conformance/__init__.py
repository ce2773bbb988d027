"""The pyops-lab conformance suite: grades a runner.py, black-box, clause by clause."""
