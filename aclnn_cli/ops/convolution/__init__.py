"""Convolution ops: a convolution's gradients lowered to dot products (families.Convolution, conv_lowering.py)."""
