"""Colours of the report's plots, shared by the plots (plots.py) and the page that explains them (html.py)."""

OK, FORGIVEN, FLAGGED, PLAIN = "#4c72b0", "#e39c2d", "#d62728", "#b0b0b0"
TOWARD, AWAY, EXACT = "#4c72b0", "#dd8452", "#8c8c8c"

# (colour, symbol, meaning) of the error-against-input panels, in drawing order
SCATTER_LEGEND = ((OK, "\u25cf", "within the rule"),
                  (FORGIVEN, "\u25cf", "forgiven: over the limit relative to |golden|, within it relative to the "
                                       "terms that cancel"),
                  (FLAGGED, "\u25cf", "flagged: breaks the rule"),
                  (FLAGGED, "\u2715", "NaN/Inf mismatch (at the top)"),
                  (PLAIN, "\u25cf", "the same element relative to |golden| alone"),
                  (FLAGGED, "- -", "the per-element limit"))
HISTOGRAM_LEGEND = ((TOWARD, "\u25a0", "toward zero (|actual| < |expected|)"), (EXACT, "\u25a0", "exact"),
                    (AWAY, "\u25a0", "away from zero"))
