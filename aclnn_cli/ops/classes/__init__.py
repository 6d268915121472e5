"""Ops of the Classes family (ops/families/classes.py): class rows beside per-position labels (NLLLoss2dBackward)."""
