"""The message decoder reads a view of immutable bytes in place and copies anything else first
(the threshold aggregator decodes upload ciphertexts as views into the signed upload)."""

from __future__ import annotations

from privfl.messages import SESSION_ID_BYTES, Codec

CODEC = Codec("views-test", 1)
SESSION = b"\x01" * SESSION_ID_BYTES


def _message() -> bytes:
    return CODEC.encode("step", SESSION, "sender", b"\x00\x00\x00\x04abcd")


def test_a_read_only_view_of_bytes_is_read_in_place():
    data = b"xx" + _message()
    _, r = CODEC.decode(memoryview(data)[2:], "step", SESSION)
    payload = r.view(4)
    assert payload.obj is data and bytes(payload) == b"abcd"


def test_a_view_of_mutable_bytes_is_copied_before_it_is_read():
    buf = bytearray(_message())
    for view in (memoryview(buf), memoryview(buf).toreadonly()):
        _, r = CODEC.decode(view, "step", SESSION)
        buf[-1] ^= 0xFF  # the sender changes its buffer after the checks
        assert bytes(r.view(4)) == b"abcd"
        buf[-1] ^= 0xFF
