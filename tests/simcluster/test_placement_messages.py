"""Placement requests that can never be valid fail with a ValueError naming the bundle, and
messages about large requests stay short (simcluster/driver/placement.py)."""

from __future__ import annotations

import math

import pytest

from simcluster.driver.placement import describe_bundles, validate_bundles
from simcluster.driver.resources import ResourceBook


@pytest.mark.parametrize("bundle", [{"CPU": math.inf}, {"CPU": -math.inf}, {"CPU": math.nan},
                                    {"": 1}, {"CPU": True}])
def test_an_amount_or_name_no_node_can_hold_is_a_value_error(bundle):
    with pytest.raises(ValueError, match=r"place\(bundles\[1\]=.*finite numbers >= 0"):
        validate_bundles([{"CPU": 1}, bundle])


def test_equal_bundles_are_folded_and_long_lists_capped():
    assert describe_bundles([{"CPU": 1}] * 10**6) == "[{'CPU': 1}] * 1000000"
    mixed = [{"CPU": i} for i in range(1000)]
    text = describe_bundles(mixed)
    assert text.startswith("[{'CPU': 0}] + [{'CPU': 1}] + [{'CPU': 2}] + ... (997 more")
    assert len(text) < 100


def test_a_request_that_never_fits_names_it_in_a_short_message():
    book = ResourceBook()
    book.add_node("node-0", {"CPU": 2})
    with pytest.raises(Exception, match=r"\[\{'CPU': 1\}\] \* 100000, strategy='PACK'") as info:
        book.check([{"CPU": 1}] * 10**5, "PACK")
    assert len(str(info.value)) < 500
