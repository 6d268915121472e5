"""Group operators: groups of channels over every sample (families.Groups): GroupNorm."""
