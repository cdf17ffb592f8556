"""Fuzzing helpers shared by the DT-PKC and RevFRF decoder tests (not a test module)."""

import time
import tracemalloc

from hypothesis import strategies as st

from privfl.errors import PrivflError

MAX_SECONDS = 1.0
MAX_PYTHON_BYTES = 32 << 20


def decode_safely(decoder, data):
    """Run ``decoder(data)``: it may succeed or raise a privfl error, nothing else, within
    MAX_SECONDS and MAX_PYTHON_BYTES of Python allocations. Returns the result or None."""
    tracemalloc.start()
    start = time.process_time()
    try:
        return decoder(data)
    except PrivflError:
        return None
    finally:
        elapsed = time.process_time() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert elapsed < MAX_SECONDS, f"decoder took {elapsed:.2f} s"
        assert peak < MAX_PYTHON_BYTES, f"decoder allocated {peak} bytes"


@st.composite
def mutated(draw, valid: bytes):
    """A valid message with a few bytes overwritten, a slice cut, bytes inserted, or a
    length prefix replaced by a huge value."""
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "huge", "truncate"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[pos] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[pos : pos + draw(st.integers(1, 64))]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "huge":
            data[pos : pos + 4] = draw(st.sampled_from([b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff"]))
        else:
            del data[pos:]
    return bytes(data)


def payloads(valid: bytes):
    """Arbitrary bytes, or mutations of a valid encoding."""
    return st.one_of(st.binary(max_size=600), mutated(valid))
