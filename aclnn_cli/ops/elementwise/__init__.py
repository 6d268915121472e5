"""Elementwise operators: each output element from the same element of each input (families.Elementwise)."""
