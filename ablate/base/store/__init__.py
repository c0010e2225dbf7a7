"""The results-store port: what a trial logs through (`port.Tracker`), what orchestration and
the report see of a store (`port.StudyStore`, `port.StudyRun`, `table.RunTable`), the one tag
vocabulary (`tags`) and what every adapter shares (`common`). The adapters behind the port
(MLflow, the file store) live in `ablate.tracking`, two floors up."""
