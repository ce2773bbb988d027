"""How evidence becomes verdicts: a check's driver, the judgements and their teaching
messages, the scenarios checks share, blocking calls, and the clause verdicts."""
