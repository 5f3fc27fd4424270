"""The requirement catalogue: one `Clause` per testable statement of the contract.

Checks name the clauses they cover with `@clause("id", ...)`; the meta-tests in
`tests/conformance/test_catalogue.py` fail when a MUST clause has no check or a check names
no clause. `docs/spec/` is generated from this catalogue (`python -m conformance spec`).
"""

from __future__ import annotations

from typing import Callable

from conformance._clauses import ALL, Clause


def clause(*ids: str) -> Callable:
    """Mark a check as covering the given clause ids (a pytest marker, readable without pytest)."""
    unknown = [i for i in ids if i not in CLAUSES]
    if not ids or unknown:
        raise ValueError(
            f"clause(*ids={ids!r}): every id must be in the catalogue; unknown: {unknown!r}. "
            "Add the clause to conformance/_clauses/ first."
        )

    def mark(fn: Callable) -> Callable:
        import pytest

        fn.__conformance_clauses__ = tuple(ids)
        return pytest.mark.clause(*ids)(fn)

    return mark


def clauses_of(fn: Callable) -> tuple[str, ...]:
    return getattr(fn, "__conformance_clauses__", ())


def _load() -> dict[str, Clause]:
    table: dict[str, Clause] = {}
    for c in ALL:
        if c.id in table:
            raise ValueError(f"duplicate clause id {c.id!r} in conformance/_clauses/")
        table[c.id] = c
    return table


CLAUSES: dict[str, Clause] = _load()
