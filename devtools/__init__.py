"""Developer tools, kept outside the installed package (the wheel ships only `ablate` and
`baselines`): the benchmark suite, the calibration simulations of the report's statistics and
one-off measurement scripts. Started one way, from the repository root: `python -m devtools TOOL
[ARGS]` (`python -m devtools --help` lists the tools)."""
