"""The names of FHAUC's protocol steps, in one enum used by both schedules, the in-process
transports and the deployment apps (a :class:`Step` is a ``str``: it travels as its value).

Single keys: ``join -> upload -> result``. Threshold keys: ``join -> keygen -> keycheck ->
upload -> decrypt -> fuse -> result`` (``decrypt``: every party but the lead; ``fuse``: the
lead only).
"""

from __future__ import annotations

from enum import StrEnum

from privfl.errors import ProtocolError


class Step(StrEnum):
    JOIN = "join"
    KEYGEN = "keygen"
    KEYCHECK = "keycheck"
    UPLOAD = "upload"
    DECRYPT = "decrypt"
    FUSE = "fuse"
    RESULT = "result"

    @classmethod
    def parse(cls, value: str) -> Step:
        """The step named ``value`` (:class:`ProtocolError` for an unknown name: it comes
        from another role)."""
        try:
            return cls(value)
        except ValueError:
            raise ProtocolError(f"unknown FHAUC step {value!r}") from None


SINGLE_KEY_STEPS = (Step.JOIN, Step.UPLOAD, Step.RESULT)
THRESHOLD_STEPS = (
    Step.JOIN,
    Step.KEYGEN,
    Step.KEYCHECK,
    Step.UPLOAD,
    Step.DECRYPT,
    Step.FUSE,
    Step.RESULT,
)
# steps whose traffic is key material (threshold keys), counted as setup, not session traffic
KEY_STEPS = frozenset({Step.KEYGEN, Step.KEYCHECK})
