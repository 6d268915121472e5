"""A generated case on disk: its manifest, case directories, shards."""
