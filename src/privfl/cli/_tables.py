"""Reading a score table into named parties: shared by ``privfl auc``, ``privfl dpauc`` and
``privfl flower local``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from privfl.errors import InputError


def load_named_parties(
    file: Path,
    score_column: str,
    label_column: str,
    party_column: str | None,
    parties: int | None,
    seed: int,
    score_range: tuple[float, float],
    pos_label: str | None = None,
) -> dict[str, tuple[Any, Any]]:
    """Read a CSV/Parquet file and split it into named parties (by column, named by its
    values, or dealt at random to ``party-0``, ``party-1``, ...). Labels are mapped to 0/1
    with the library's one ``pos_label`` rule (:func:`privfl.evaluation.reference.
    validate_parties`: 0/1 and -1/1 need nothing, other labels ``--pos-label``; a numeric
    ``--pos-label`` matches numeric labels); errors name the party."""
    from privfl.datasets import check_party_names, deal, read_table, typed_pos_label
    from privfl.evaluation.curves import binarize_labels
    from privfl.evaluation.reference import validate_parties

    if (party_column is None) == (parties is None):
        raise InputError("give exactly one of --party-column or --parties K")
    if parties is not None and parties < 2:
        raise InputError(f"--parties must be at least 2 (a federation), got {parties}")
    df = read_table(file)
    for col in (score_column, label_column, party_column):
        if col is not None and col not in df.columns:
            raise InputError(f"unknown column {col!r}; columns are {list(df.columns)}")
    if len(df) == 0:
        raise InputError(f"{file} has a header but no rows")
    pos = typed_pos_label(df[label_column], pos_label)
    if party_column is not None:
        blank = df[party_column].isna() | (df[party_column].astype(str).str.strip() == "")
        if blank.any():
            raise InputError(
                f"{int(blank.sum())} of {len(df)} rows have no value in the party column "
                f"{party_column!r}; fill them in or remove them (no row is dropped silently)"
            )
        groups = list(df.groupby(df[party_column].astype(str), sort=True))
        if len(groups) < 2:
            raise InputError(
                f"the party column {party_column!r} holds one value ({groups[0][0]!r}): a "
                "federation needs at least 2 parties"
            )
        names = check_party_names([str(k) for k, _ in groups])
        labels = binarize_labels([g[label_column].to_numpy() for _, g in groups], pos)
        named = {
            n: (g[score_column].to_numpy(), y)
            for n, (_, g), y in zip(names, groups, labels, strict=True)
        }
        validate_parties(named, score_range)
        return named
    if parties is None:  # unreachable: exactly one of the two was checked above
        raise InputError("give --parties K")
    s = df[score_column].to_numpy()
    (y,) = binarize_labels([df[label_column].to_numpy()], pos)
    validate_parties({"all rows": (s, y)}, score_range)
    return {f"party-{i}": p for i, p in enumerate(deal(s, y, parties, seed))}
