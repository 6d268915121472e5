"""Contraction operators: dot products over K (families.Contraction): the batched matrix product."""
