"""Scatter operators: rows added into the output rows an index names (families.Scatter): embeddings."""
