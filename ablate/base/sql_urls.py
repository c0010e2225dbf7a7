"""SQL database URLs as ablate hands them to SQLAlchemy (Optuna storages, MLflow on PostgreSQL,
trial leases)."""

from __future__ import annotations


def driver_url(url: str) -> str:
    """`postgresql://…` with the psycopg2 driver spelled out: SQLAlchemy 2.1 otherwise picks
    psycopg 3, which ablate does not install. Other URLs are returned unchanged."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg2://" + url[len(prefix) :]
    return url
