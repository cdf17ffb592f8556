"""RevFRF: revocable federated random forest over vertically partitioned data (DT-PKC)."""

from privfl.forest.revfrf import RevFRF, RevocationReport

__all__ = ["RevFRF", "RevocationReport"]
