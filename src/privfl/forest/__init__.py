"""RevFRF: revocable federated random forest over vertically partitioned data (DT-PKC).

Roles: :mod:`.center_server`, :mod:`.participant`, :mod:`.computation_provider`, :mod:`.kgc`;
their messages: :mod:`.messages`, :mod:`.secure_ops` (HoAdd/HoLT); the facade:
:class:`RevFRF`."""

from privfl.forest.freshness import RevocationReport
from privfl.forest.revfrf import ForestReport, RevFRF

__all__ = ["ForestReport", "RevFRF", "RevocationReport"]
