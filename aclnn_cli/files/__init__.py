"""Files on disk: regular-file reads, JSON, the stat cache, quoting user values, click path types."""
