"""What the lab is: its clauses, the commands and fixtures the checks give a runner, the
configuration a course grades with, the runs.jsonl records and the lab's times."""
