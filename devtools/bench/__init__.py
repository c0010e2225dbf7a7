"""Micro-benchmarks (`python -m devtools bench`, `make bench`): measured here, reported as ratios
against a baseline; and the vLLM check on a CUDA machine (`python -m devtools gpu-check`)."""
