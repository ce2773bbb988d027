"""The pyops-lab conformance suite: grades a runner.py, black-box, clause by clause.

PYTEST_DONT_REWRITE: the checks judge through conformance.judging.expect, not bare asserts, and the
package is already imported by the CLI when pytest loads the plugin.
"""
