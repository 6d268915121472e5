"""Channel operators: reduce N and the spatial axes, keep axis 1 (families.Channels): BatchNorm."""
