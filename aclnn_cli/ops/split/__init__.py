"""Split operators: an input split in halves along dim (families.Split): the GLU gradients."""
