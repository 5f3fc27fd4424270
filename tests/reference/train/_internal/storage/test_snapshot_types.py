"""Metrics of the types Ray's pydantic snapshot stores are stored, spelled as pydantic does."""

import datetime
import decimal
import enum
import pathlib
import uuid

import pytest

from reference.train._internal.storage.snapshot import encode_json, to_jsonable

pydantic = pytest.importorskip("pydantic")


class Colour(enum.Enum):
    RED = 3
    BLUE = "b"


_SAMPLES = [
    datetime.datetime(2020, 1, 2, 3, 4, 5, 123), datetime.date(2020, 1, 2), datetime.time(3, 4),
    b"ab", 1 + 2j, 1.5 - 2j,
    decimal.Decimal("1.5"), Colour.RED, Colour.BLUE, pathlib.Path("/x"),
    uuid.UUID(int=5), {1, 2}, (1, "a"),
]


def _pydantic_json(value) -> str:
    from typing import Any

    return pydantic.TypeAdapter(Any).dump_json(value).decode()


@pytest.mark.parametrize("value", _SAMPLES, ids=repr)
def test_spelled_as_pydantic_spells_it(value):
    assert encode_json({"k": value}, "metrics") == _pydantic_json({"k": value})


def test_what_neither_can_store_names_the_key():
    with pytest.raises(TypeError, match=r"metrics\['k'\] holds .* of type object"):
        to_jsonable({"k": object()}, "metrics")
