"""Judging dumps: element errors and metrics, the precision standards, one case's chunked
comparison, verdicts and result types, and the defect catalogue that proves the gate."""
