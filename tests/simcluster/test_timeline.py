"""`simcluster history FILE --plot`: the timeline model, its PNG and HTML pictures, the CLI."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import time
from collections import Counter

import pytest

from simcluster import Cluster, History, NodeSpec
from simcluster.cli import timeline
from simcluster.cli.main import main

# A run of two ranks on two nodes: rank 1 is killed by a planned fault during attempt 0, the
# controller retries, node-1 is removed, and attempt 1 runs on one worker (a resize).
# A tagless "logger" worker shows the name rule; node-0 pauses during attempt 1.
_RUN = {"run": "demo"}
_EVENTS = [
    ("cluster_start", {"address": "127.0.0.1:1"}),
    ("node_up", {"node": "node-0"}),
    ("node_up", {"node": "node-1"}),
    ("train.run_start", {**_RUN, "storage": "/tmp/demo", "num_workers": 2}),
    ("train.attempt_start", {**_RUN, "attempt": 0, "world_size": 2, "checkpoint": None}),
    ("worker_start", {"worker": "worker-0", "node": "node-0", "name": "g0:rank0", "pid": 10,
                      "tags": {**_RUN, "attempt": 0, "rank": 0}}),
    ("worker_start", {"worker": "worker-1", "node": "node-1", "name": "g0:rank1", "pid": 11,
                      "tags": {**_RUN, "attempt": 0, "rank": 1}}),
    ("worker_start", {"worker": "worker-2", "node": "node-0", "name": "logger", "pid": 12}),
    ("train.report", {**_RUN, "attempt": 0, "round": 0, "report": 1, "checkpoint": "/c/1"}),
    ("fault", {"action": "kill_worker", "worker": "worker-1", "step": 0, "trigger": "t"}),
    ("worker_exit", {"worker": "worker-1", "node": "node-1", "code": None, "signal": 9,
                     "reason": "exited"}),
    ("train.failure", {**_RUN, "attempt": 0, "ranks": [1], "cause": "killed",
                       "budget": "max_failures", "failures": 1, "limit": 2,
                       "decision": "retry"}),
    ("worker_exit", {"worker": "worker-0", "node": "node-0", "code": 0, "signal": None,
                     "reason": "exited"}),
    ("node_down", {"node": "node-1", "reason": "removed"}),
    ("train.resize", {**_RUN, "attempt": 1, "old_size": 2, "new_size": 1}),
    ("train.attempt_start", {**_RUN, "attempt": 1, "world_size": 1, "checkpoint": "/c/1"}),
    ("worker_start", {"worker": "worker-3", "node": "node-0", "name": "g1:rank0", "pid": 13,
                      "tags": {**_RUN, "attempt": 1, "rank": 0}}),
    ("train.report", {**_RUN, "attempt": 1, "round": 0, "report": 2, "checkpoint": None}),
    ("node_paused", {"node": "node-0"}),
    ("node_resumed", {"node": "node-0"}),
    ("train.report", {**_RUN, "attempt": 1, "round": 1, "report": 3, "checkpoint": "/c/3"}),
    ("worker_exit", {"worker": "worker-3", "node": "node-0", "code": 0, "signal": None,
                     "reason": "exited"}),
    ("worker_exit", {"worker": "worker-2", "node": "node-0", "code": 0, "signal": None,
                     "reason": "exited"}),
    ("train.run_end", {**_RUN, "state": "FINISHED"}),
    ("cluster_stop", {}),
]
HISTORY = [{"t": 100.0 + 0.5 * i, "seq": i + 1, "event": name, **fields}
           for i, (name, fields) in enumerate(_EVENTS)]

LANES = ["node-0", "node-1", "run", "rank 0", "rank 1", "logger"]
MARKS = {"report": 1, "checkpoint": 2, "restart": 1, "resize": 1, "failure": 2, "fault": 1,
         "node_down": 1}
# node-0: up, paused, up; node-1: up; rank 0: two attempts; rank 1: one; logger: one
COUNTS = {"lanes": 6, "spans": 8, "marks": MARKS}


@pytest.fixture
def history_file(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in HISTORY))
    return path


def test_the_model_has_the_lanes_spans_and_marks():
    tl = timeline.build(HISTORY)
    assert tl.lanes == LANES
    assert tl.duration == pytest.approx(0.5 * (len(HISTORY) - 1))
    spans = sorted((s.lane, s.kind, s.start, s.end, s.label) for s in tl.spans)
    assert spans == [
        ("logger", "running", 3.5, 11.0, "worker-2"),
        ("node-0", "paused", 9.0, 9.5, "node-0"),
        ("node-0", "up", 0.5, 9.0, "node-0"),
        ("node-0", "up", 9.5, 12.0, "node-0"),  # to the last event
        ("node-1", "up", 1.0, 6.5, "node-1"),
        ("rank 0", "running", 2.5, 6.0, "worker-0"),
        ("rank 0", "running", 8.0, 10.5, "worker-3"),
        ("rank 1", "running", 3.0, 5.0, "worker-1"),
    ]
    assert tl.counts() == COUNTS
    where = [(m.kind, m.lane, m.t) for m in tl.marks]
    assert where == [
        ("checkpoint", None, 4.0), ("fault", "rank 1", 4.5), ("failure", "rank 1", 5.0),
        ("failure", None, 5.5), ("node_down", "node-1", 6.5), ("resize", None, 7.0),
        ("restart", None, 7.5), ("report", None, 8.5), ("checkpoint", None, 10.0),
    ]
    failure = tl.marks[2]
    assert failure.label == "worker-1 killed by SIGKILL"
    assert failure.fields["signal"] == 9 and "t" not in failure.fields


def test_lane_rules_for_untagged_workers_and_unclean_exits():
    events = [{"t": 5.0, "seq": 1, "event": "node_up", "node": "node-10"},
              {"t": 5.0, "seq": 2, "event": "node_up", "node": "node-2"},
              {"t": 6.0, "seq": 3, "event": "worker_start", "worker": "worker-0",
               "node": "node-2", "name": "w", "pid": 1},
              {"t": 7.0, "seq": 4, "event": "worker_exit", "worker": "worker-0",
               "node": "node-2", "code": 1, "signal": None, "reason": "exited"},
              {"t": 8.0, "seq": 5, "event": "fault", "action": "kill_node", "node": "node-2"},
              {"t": 8.5, "seq": 6, "event": "node_down", "node": "node-10",
               "reason": "shutdown"},
              {"t": 9.0, "seq": 7, "event": "cluster_stop"}]
    tl = timeline.build(events)
    assert ("node-10", 0.0, 3.5) in [(s.lane, s.start, s.end) for s in tl.spans]
    assert tl.lanes == ["node-2", "node-10", "w"]  # by node index; no run-wide marks: no "run"
    assert [(m.kind, m.lane, m.label) for m in tl.marks] == [
        ("failure", "w", "worker-0 exit code 1"),
        ("fault", "node-2", "fault kill_node node-2")]  # and a shutdown is no node_down mark
    assert timeline.build([]).counts() == {"lanes": 0, "spans": 0, "marks": {}}
    closing = [*events[:3], {**events[3], "code": None, "signal": 9, "reason": "shutdown"}]
    assert timeline.build(closing).marks == []  # killed by the cluster closing: no failure


def test_html_draws_one_svg_element_per_span_and_mark(tmp_path):
    path = tmp_path / "run.html"
    assert timeline.to_html(timeline.build(HISTORY), path) == COUNTS
    text = path.read_text()
    assert "<script" not in text and "http://" not in text.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    classes = Counter(re.findall(r'<(?:circle|rect|path)\b[^>]*class="mark ([a-z_]+)"', text))
    assert dict(classes) == MARKS
    spans = Counter(re.findall(r'<rect\b[^>]*class="span ([a-z]+)"', text))
    assert dict(spans) == {"up": 3, "paused": 1, "running": 4}
    labels = re.findall(r'<text class="lane-label"[^>]*>([^<]*)</text>', text)
    assert labels == LANES
    assert re.search(r'class="mark fault"[^>]*>\s*<title>[^<]*action: kill_worker', text)
    assert len(re.findall(r'class="swatch ', text)) == 3 + len(timeline.MARK_KINDS)


def _png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", data[:16]
    return struct.unpack(">II", data[16:24])


def test_png_is_a_picture_of_sensible_size(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "run.png"
    assert timeline.to_png(timeline.build(HISTORY), path) == COUNTS
    width, height = _png_size(path)
    assert 800 <= width <= 1600 and 250 <= height <= 800, (width, height)


def test_render_chooses_by_suffix_and_names_the_allowed_ones(tmp_path):
    path = tmp_path / "new" / "folder" / "run.HTML"
    assert timeline.render(timeline.build(HISTORY), path) == COUNTS  # makes the folder
    with pytest.raises(ValueError, match=r"suffix must be one of \.png, \.html \(got '\.svg'\)"):
        timeline.render(timeline.build(HISTORY), tmp_path / "run.svg")


def test_cli_writes_the_picture(history_file, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "images" / "timeline.png"
    done = subprocess.run([sys.executable, "-m", "simcluster", "history", str(history_file),
                           "--plot", str(out)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last == f"simcluster history: wrote {out} (6 lanes, 9 marks)"
    assert "train.report" in done.stdout  # the text timeline is still printed
    _png_size(out)


def test_cli_bad_suffix_exits_2_naming_the_allowed_ones(history_file, tmp_path, capsys):
    assert main(["history", str(history_file), "--plot", str(tmp_path / "x.svg")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before printing anything
    assert "--plot" in captured.err and ".png, .html" in captured.err
    assert not (tmp_path / "x.svg").exists()


@pytest.mark.slow
def test_a_real_history_shows_the_killed_worker(tmp_path):
    path = tmp_path / "history.jsonl"
    cluster = Cluster(nodes=[NodeSpec(cpus=1)] * 2, history_path=path)
    try:
        w = cluster.start_worker("node-1", time.sleep, (30,), name="sleeper",
                                 tags={"rank": 3}, timeout_s=5)
        w.kill()
        assert w.wait(timeout=5).signal == 9
    finally:
        cluster.close()
    tl = timeline.build(History.read(path))
    assert tl.lanes == ["node-0", "node-1", "rank 3"]
    failures = [m for m in tl.marks if m.kind == "failure"]
    assert [(m.lane, m.label) for m in failures] == [("rank 3", f"{w.id} killed by SIGKILL")]
    assert [s.lane for s in tl.spans if s.kind == "running"] == ["rank 3"]
    assert timeline.to_html(tl, tmp_path / "real.html")["marks"] == {"failure": 1}
