"""Ops of the Segments family (ops/families/segments.py): runs along an axis summed (RepeatInterleaveGrad)."""
