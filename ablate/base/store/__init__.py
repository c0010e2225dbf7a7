"""The results-store port: what a trial logs through (`port.Tracker`), what orchestration and
the report see of a store (`port.StudyStore`, `port.StudyRun`, `table.RunTable`) and what a
store may add to it (its own failures, `port.StoreFailures`; its leases' place, the lease port
`leases`; a browser UI, `ui.HasUI`), the one tag vocabulary (`tags`) and what every adapter
shares (`common`). The adapters behind the ports (MLflow, the file store, SQL leases) live in
`ablate.tracking` (floor 7)."""
