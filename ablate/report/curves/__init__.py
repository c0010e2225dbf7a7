"""Compute–performance curves: ScaleRL's sigmoid fit (`fit`), what a fit is worth (`check`),
per-arm fits and the comparison rule (`analysis`), and their tables, sentences and figure
(`section`)."""
