"""Micro-benchmarks (`ablate bench`): measured here, reported as ratios against a baseline."""
