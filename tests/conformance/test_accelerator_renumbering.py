"""On a cluster the suite does not own, the accelerator checks judge the pattern of the
device ids the workers saw, renumbered from 0, since which GPUs are free is not theirs to
choose (conformance/checks/check_accelerators.py `_as_if_alone`)."""

from conformance.checks.check_accelerators import _as_if_alone


def _row(rank, cuda=None, hip=None, node="n1"):
    return {"rank": rank, "cuda": cuda, "hip": hip, "node": node}


def test_ids_are_renumbered_in_numeric_order_keeping_the_pattern():
    rows, setting = _as_if_alone([_row(0, "10"), _row(1, "3")], "fit")
    assert [r["cuda"] for r in rows] == ["1", "0"]  # 3 < 10 numerically, not as text
    assert "(3, 10 seen)" in setting
    rows, _ = _as_if_alone([_row(0, "5,7"), _row(1, "5,7")], "fit")
    assert [r["cuda"] for r in rows] == ["0,1", "0,1"]  # shared: still the same on both
    rows, _ = _as_if_alone([_row(0, "6"), _row(1, "6")], "fit")
    assert [r["cuda"] for r in rows] == ["0", "0"]  # fractional: one GPU for both


def test_wrong_patterns_stay_wrong():
    rows, _ = _as_if_alone([_row(0, "2,4"), _row(1, "4")], "fit")
    assert [r["cuda"] for r in rows] == ["0,1", "1"]  # not shared alike: unequal after too
    rows, _ = _as_if_alone([_row(0, None, hip="3"), _row(1, "3")], "fit")
    assert (rows[0]["hip"], rows[0]["cuda"], rows[1]["cuda"]) == ("0", None, "0")


def test_workers_on_several_nodes_give_a_reason_to_skip():
    got = _as_if_alone([_row(0, "0", node="a"), _row(1, "0", node="b")], "fit")
    assert isinstance(got, str) and "ran on 2 nodes" in got
