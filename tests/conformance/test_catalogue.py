"""Meta-tests of the catalogue: every MUST clause is checked, every check names a clause."""

import importlib
import pkgutil

import pytest

import conformance.checks as checks_pkg
from conformance import spec
from conformance.catalogue import CLAUSES, clause, clauses_of


def _checks():
    for info in pkgutil.iter_modules(checks_pkg.__path__):
        if info.name.startswith("check_"):
            module = importlib.import_module(f"conformance.checks.{info.name}")
            for name, fn in vars(module).items():
                if name.startswith("check_") and callable(fn) and fn.__module__ == module.__name__:
                    yield f"{info.name}.py::{name}", fn


def test_every_check_names_a_clause():
    nameless = [cid for cid, fn in _checks() if not clauses_of(fn)]
    assert nameless == [], f"checks that name no clause: {nameless}"


def test_every_must_clause_has_a_check():
    covered = spec.coverage()
    missing = [c.id for c in CLAUSES.values() if c.level == "MUST" and not covered.get(c.id)]
    assert missing == [], f"MUST clauses without a check: {missing}"


def test_clause_entries_are_complete():
    for c in CLAUSES.values():
        assert c.level in ("MUST", "SHOULD"), c.id
        assert c.title and c.text and c.source, c.id
        assert c.area in spec.AREAS, f"{c.id}: area {c.area!r} has no spec page"


def test_unknown_clause_id_is_rejected():
    with pytest.raises(ValueError, match="no-such.clause"):
        clause("no-such.clause")
    with pytest.raises(ValueError, match="every id"):
        clause()


def test_spec_is_up_to_date():
    stale = spec.stale("docs/spec")
    assert stale == [], f"docs/spec out of date: {stale}; run `python -m conformance spec`"
