"""The reference runner: runner/runner.py, one standard-library file a learner copies as is."""
