"""Adaptive average pooling's gradients: the Adaptive window family (families/window.py)."""
