"""SQL database URLs as ablate hands them to SQLAlchemy (Optuna storages, MLflow on PostgreSQL,
trial leases)."""

from __future__ import annotations

from pathlib import Path


def driver_url(url: str) -> str:
    """`postgresql://…` with the psycopg2 driver spelled out: SQLAlchemy 2.1 otherwise picks
    psycopg 3, which ablate does not install. Other URLs are returned unchanged."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg2://" + url[len(prefix) :]
    return url


#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def sqlite_file_problem(url: str) -> str | None:
    """Why the `sqlite:///` database at `url` cannot be used, in one line: a file that exists
    and is not one (damaged, truncated to a foreign header, another file). None for a database
    that does not exist yet, an empty file (SQLite makes it its own) and other URLs."""

    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return None
    path = Path(url[len(prefix) :])
    if not path.is_file() or path.stat().st_size == 0:
        return None
    with path.open("rb") as handle:
        header = handle.read(len(SQLITE_HEADER))
    if header == SQLITE_HEADER:
        return None
    return (
        f"{path} is not an SQLite database (damaged, or another file): move it away to start "
        "afresh, or restore it"
    )
