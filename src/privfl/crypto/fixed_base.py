"""Fixed-base exponentiation modulo N² for DT-PKC's public bases (the generator g, a public
key h): a window table of the base, then each power costs one multiplication per window of
the exponent and no squaring. Pure arithmetic on public values; the exponents (secret
randomness) are only read digit by digit, every window whatever its digit.

:func:`best_window` chooses the window from the number of powers a caller will take of the
base (a fresh process per message amortises a table only over that message's powers), or
``None`` when plain ``powmod`` is cheaper."""

from __future__ import annotations

import functools
from typing import Any

import gmpy2
from gmpy2 import mpz

from privfl.crypto.parallel import thread_map

Mpz = Any  # a gmpy2.mpz (gmpy2 ships no type stubs)

WINDOWS = range(2, 9)
POWMOD_COST = 0.9  # one powmod ~ 0.9 * exponent bits modular multiplications (gmpy2, measured)


def best_window(exponent_bits: int, uses: int) -> int | None:
    """The window minimising table plus ``uses`` powers, in modular multiplications, or
    ``None`` when ``uses`` plain powmods cost less."""
    plain = POWMOD_COST * exponent_bits * uses

    def cost(w: int) -> float:
        rows = -(-exponent_bits // w)
        return rows * ((1 << w) - 1) + uses * rows

    w = min(WINDOWS, key=cost)
    return w if cost(w) < plain else None


@functools.lru_cache(maxsize=32)
def table(base: Mpz, modulus: Mpz, exponent_bits: int, window: int) -> tuple[list[Mpz], ...]:
    """Window table of a public base: ``base^(d 2^(window i))`` per row i, digit d."""
    rows, cur = [], mpz(base) % modulus
    for _ in range(-(-exponent_bits // window)):
        row = [mpz(1)]
        for _ in range(1, 1 << window):
            row.append(row[-1] * cur % modulus)
        rows.append(row)
        cur = row[-1] * cur % modulus
    return tuple(rows)


def power(rows: tuple[list[Mpz], ...], e: Mpz, window: int, modulus: Mpz) -> Mpz:
    """``base^e mod modulus`` from ``table(base, modulus, bits, window)``, 0 <= e < 2^bits."""
    if e >> (len(rows) * window):
        raise ValueError("exponent beyond the table")
    r, e, mask = mpz(1), mpz(e), (1 << window) - 1
    for row in rows:  # every window, whatever its digit
        r = r * row[int(e & mask)] % modulus
        e >>= window
    return r


def pairs(
    a: Mpz, b: Mpz, modulus: Mpz, exponent_bits: int, exponents: list[Mpz]
) -> list[tuple[Mpz, Mpz]]:
    """``(a^e, b^e) mod modulus`` for every e of ``exponents`` (each below 2^exponent_bits),
    on the thread pool (:mod:`.parallel`), with window tables of a and b when their count
    makes them cheaper (:func:`best_window`)."""
    w = best_window(exponent_bits, len(exponents))
    if w is None:
        return thread_map(lambda e: (gmpy2.powmod(a, e, modulus), gmpy2.powmod(b, e, modulus)),
                          exponents)  # fmt: skip
    ta, tb = thread_map(lambda base: table(base, modulus, exponent_bits, w), [a, b])
    return thread_map(lambda e: (power(ta, e, w, modulus), power(tb, e, w, modulus)), exponents)
