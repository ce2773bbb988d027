"""How a runner is run: a private lab per check, identities, processes and their reaping,
forks, CPU wait, the machine's shared turns, and reading a hostile lab's files safely."""
