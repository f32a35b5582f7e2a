"""Load generation: the open-loop replayer (and, apart, Locust files that nothing imports)."""
