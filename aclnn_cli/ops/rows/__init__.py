"""Row operators: an output element from whole rows along reduced axes (families.Rows): softmax, norms, losses."""
