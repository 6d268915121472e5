"""How work is cut and run: stages, worker pools, block digests, the child reaper."""
