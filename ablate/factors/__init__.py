"""Floor 1: the factor space. `Algorithm` (one documented field per factor) and its checks;
the registries a factor's values live in (`advantages`, `surrogates`, `trust_regions`,
`reward_controls`, `critic`), the staged loss (`objective`); and the records that define a
trial (`spec`), a command-line override and a paper's finding. The presets built from them are
`ablate.baselines`, two floors up."""
