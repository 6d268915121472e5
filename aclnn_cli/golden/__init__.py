"""Golden data: correctly rounded expected results and seeded inputs, written as device-layout
storage with a case.json manifest (gen)."""
