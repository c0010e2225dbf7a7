"""Simulations that check the report's statistics keep their promises: whole studies of pass@1
(`simulate`, `calibration`; `python -m devtools calibrate`) and compute–performance curves
(`curve_calibration`; `python -m devtools curve-calibration`)."""
