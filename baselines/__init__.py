"""Published algorithms as `Algorithm` presets, one module each, every value cited.

Load one by name with `ablate.baseline("dapo")`. Preset values live only here.
"""
