"""The report's data contract: `StudyData` (one study's trials, curves, samples and base Pass@k
as tidy frames) and how it is loaded from the study's results."""
