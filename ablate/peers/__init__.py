"""The supported-factor matrix against TRL and verl, and the export of an algorithm to their
configs: `model` (the vocabulary), `trl` and `verl` (the tables, data), `export` (the logic)."""

from ablate.peers.export import PEERS, Export, export_config, matrix_rows, render
from ablate.peers.model import PeerBudget

__all__ = ["PEERS", "Export", "PeerBudget", "export_config", "matrix_rows", "render"]
