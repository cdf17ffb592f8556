"""What every role of a threshold FHAUC session derives from its transcript (pure functions,
public unless stated).

* :func:`threshold_transcript` / :func:`threshold_session`: the transcript the threshold
  session key is derived from, and the threshold-CKKS session id of the joint key, hashes of
  the transcript (so they bind the whole config, the policy and every party's fresh nonce,
  and the aggregator cannot choose them: the common reference polynomials come from it).
* :func:`lead_index`: which party fuses the decryption, a hash of the transcript and of the
  lead secrets the parties committed to (:func:`lead_commitment`) in their joins. The
  aggregator learns it only after every party has sampled its key share and cannot steer it
  without abandoning the session after the key round (each party records abandoned
  sessions).
* :func:`reveal_key`: the AES-GCM key of the lead's reveal, from the parties' session key.
* :data:`LABEL`: the protocol version every hash here binds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from privfl.errors import ProtocolError
from privfl.messages import SESSION_ID_BYTES

# v2: the noise model with the encoding and coherent errors, and the layout rule joint_pays
# (v1 roles build other upload layouts); v3: flooding noise sized for 32 decryptions per key
# set and up to 64 executions (v2 roles size it for 16 and refuse more than 16); v4: the
# malicious AUC's executions side by side in lanes (v3 roles upload one group per
# execution); v5: the malicious curve's and metrics' executions side by side too
# (layout.CurveLayout, lanes: v4 roles upload and decrypt one group per execution); v6: the
# "fhauc" set's batch of 8,192 slots and the malicious AUC's joint lanes
# (plan.malicious_layout; v5 roles pack 4,096 slots and two ciphertexts per group). Roles of
# different versions derive different transcripts and lead commitments, so a mixed session
# fails in the key rounds, before any upload
LABEL = b"privfl/fhauc-threshold/v6|"


def _hash(purpose: bytes, transcript: bytes) -> bytes:
    return hashlib.sha256(LABEL + purpose + b"|" + transcript).digest()


def threshold_transcript(transcript: bytes) -> bytes:
    """The transcript the threshold session key is derived from (never the single-key one)."""
    return _hash(b"transcript", transcript)


def threshold_session(transcript: bytes) -> bytes:
    return _hash(b"session", transcript)[:SESSION_ID_BYTES]


LEAD_SECRET_BYTES = 32


def lead_commitment(secret: bytes) -> bytes:
    """A party's commitment to its lead secret ``r_i``: ``SHA-256(label | r_i)``, sent as
    its join nonce, so it is fixed (and signed) before the party sees anyone's secret."""
    return hashlib.sha256(LABEL + b"lead-commit|" + secret).digest()


def check_reveals(
    parties: Sequence[str], commitments: Sequence[bytes], secrets_: Sequence[bytes]
) -> bytes:
    """The lead seed ``SHA-256(r_1 | ... | r_M)`` once every party's revealed secret opens
    the commitment of its signed join; :class:`ProtocolError` naming the first party whose
    reveal does not match (every honest party then aborts the session)."""
    if not len(parties) == len(commitments) == len(secrets_):
        raise ProtocolError("the lead reveals do not match the session's parties")
    for name, commit, secret in zip(parties, commitments, secrets_, strict=True):
        if len(secret) != LEAD_SECRET_BYTES or lead_commitment(secret) != commit:
            raise ProtocolError(
                f"the lead secret revealed by {name!r} does not open its join's commitment"
            )
    return hashlib.sha256(LABEL + b"lead-seed|" + b"".join(secrets_)).digest()


def lead_index(transcript: bytes, parties: int, seed: bytes) -> int:
    """The party that fuses the decryption: ``H(transcript, r_1..r_M) mod M``, where every
    party committed to its secret ``r_i`` in its signed join and reveals it (in its signed
    key check) only after the aggregator relayed every join, i.e. after all commitments are
    fixed. No role can steer it while one party is honest: the aggregator sees nothing of
    the secrets before it relays the joins, and a party colluding with it cannot change its
    secret after seeing the others'. The aggregator learns the lead when the key checks
    arrive and can only abandon the session then, which every party records (the
    abandoned sessions). Bias of the reduction mod ``M``: below ``M / 2^256``."""
    return int.from_bytes(_hash(b"lead", transcript + seed), "big") % parties


def reveal_key(key: bytes) -> bytes:
    """The AES-256-GCM key of the lead's reveal, from the parties' session key."""
    return HKDF(
        algorithm=hashes.SHA256(), length=32, salt=b"privfl-fhauc-threshold-reveal", info=b"v1"
    ).derive(key)
