"""conformance.progress: plain lines count done / total and never overrun the total; the
live face runs when asked; bad totals are refused by name."""

import io

import pytest

from conformance.progress import Progress, format_elapsed


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_plain_lines_count_done_of_total_with_elapsed():
    out, clock = io.StringIO(), _Clock()
    with Progress(2, "conformance: fake", stream=out, clock=clock) as p:
        p.start("a.one")
        clock.now += 41
        p.done("a.one", "passed")
        p.start("a.two")
        clock.now += 3600
        p.done("a.two", "failed")
    lines = out.getvalue().splitlines()
    assert lines[0] == "[1/2] 00:41 a.one ... passed"
    assert lines[1] == "[2/2] 1:00:41 a.two ... failed"
    assert lines[2] == "conformance: fake: 2/2 done in 1:00:41 (1 failed, 1 passed)"


def test_more_items_than_total_grow_the_total():
    out = io.StringIO()
    p = Progress(1, "t", stream=out, live=False)
    p.done("x", "passed")
    p.done("y", "passed")
    assert out.getvalue().splitlines()[1].startswith("[2/2] ")


def test_non_tty_stream_is_plain_by_default_and_close_is_idempotent():
    out = io.StringIO()
    p = Progress(1, "t", stream=out)
    assert p.live is False
    p.close()
    p.close()
    assert out.getvalue().count("\n") == 1


def test_live_display_runs_with_rich():
    pytest.importorskip("rich")
    out = io.StringIO()
    with Progress(3, "live", stream=out, live=True) as p:
        assert p.live
        p.start("x")
        p.done("x", "passed")
    assert "1/3" in out.getvalue()


@pytest.mark.parametrize("total", [-1, 1.5, True, "3"])
def test_bad_total_is_refused_by_name(total):
    with pytest.raises(ValueError, match=r"total="):
        Progress(total, "t", stream=io.StringIO())


def test_format_elapsed():
    assert format_elapsed(0) == "00:00"
    assert format_elapsed(61.9) == "01:01"
    assert format_elapsed(3 * 3600 + 5) == "3:00:05"
