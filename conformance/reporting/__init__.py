"""How verdicts reach people and platforms: the JSON report and the step table, the
learner's view, the platforms' formats, and the record of what produced a grade."""
