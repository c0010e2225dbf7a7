"""Statistics over seeds: estimates, tests, Holm and power (`inference`), per-trial measures read
off `StudyData` (`measures`), the report's contrasts (`contrasts`) and `ablate plan` (`plan`)."""
