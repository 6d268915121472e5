"""Window ops: pooling gradients (the window family, ops/families/window.py)."""
