"""History file and the checkers over it (pure: synthetic histories)."""

from __future__ import annotations

import json
import threading

from simcluster import History, checkers


def test_history_appends_json_lines_in_order(tmp_path):
    history = History(tmp_path / "h.jsonl")
    history.record("node_up", node="node-0", resources={"CPU": 1.0})
    history.record_message("worker-0", "to_worker", "dict", 42)
    # Message events are batched until the next other event or a flush.
    assert [e["event"] for e in History.read(history.path)] == ["node_up"]
    history.flush()
    events = History.read(history.path)
    assert [e["event"] for e in events] == ["node_up", "message"]
    assert [e["seq"] for e in events] == [1, 2]
    assert events[0]["t"] <= events[1]["t"]
    assert events[1] == {**events[1], "worker": "worker-0", "direction": "to_worker",
                         "type": "dict", "size": 42}
    history.record_message("worker-0", "from_worker", "int", 7)
    history.record("node_down", node="node-0")  # writes the batch first, in seq order
    assert [e["seq"] for e in History.read(history.path)] == [1, 2, 3, 4]
    history.close()
    assert history.record("late") is None  # after close: ignored


def test_reader_skips_a_torn_last_line(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps({"event": "a", "seq": 1, "t": 0}) + "\n" + '{"event": "b", "se')
    assert [e["event"] for e in History.read(path)] == ["a"]


def test_concurrent_writers_keep_whole_lines(tmp_path):
    history = History(tmp_path / "h.jsonl")

    def write(n):
        for i in range(200):
            history.record("message", worker=f"w{n}", i=i)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = history.events()
    assert len(events) == 800
    assert [e["seq"] for e in events] == list(range(1, 801))


def ev(seq, event, **fields):
    return {"t": float(seq), "seq": seq, "event": event, **fields}


START = [ev(1, "cluster_start"), ev(2, "node_up", node="n0", resources={"CPU": 2.0}),
         ev(3, "worker_start", worker="w0", node="n0")]


def test_every_worker_exits():
    done = START + [ev(4, "worker_exit", worker="w0", node="n0"), ev(5, "cluster_stop")]
    assert checkers.every_worker_exits(done).status == "valid"
    assert checkers.every_worker_exits(START).status == "unknown"
    missing = START + [ev(4, "cluster_stop")]
    verdict = checkers.every_worker_exits(missing)
    assert verdict.status == "invalid" and "w0" in verdict.reason
    twice = done[:-1] + [ev(5, "worker_exit", worker="w0", node="n0")]
    assert checkers.every_worker_exits(twice).status == "invalid"
    orphan = START[:2] + [ev(3, "worker_exit", worker="w9", node="n0")]
    assert checkers.every_worker_exits(orphan).status == "invalid"


def test_no_worker_on_down_node():
    ok = START + [ev(4, "message", worker="w0", direction="from_worker"),
                  ev(5, "node_down", node="n0"), ev(6, "worker_exit", worker="w0", node="n0")]
    assert checkers.no_worker_on_down_node(ok).valid
    late = ok + [ev(7, "message", worker="w0", direction="from_worker")]
    assert checkers.no_worker_on_down_node(late).status == "invalid"
    started = ok + [ev(7, "worker_start", worker="w1", node="n0")]
    assert "w1" in checkers.no_worker_on_down_node(started).reason


def test_never_oversubscribed():
    ok = START + [ev(4, "placement", placement="p0", bundles=[{"CPU": 2.0}], nodes=["n0"]),
                  ev(5, "placement_released", placement="p0"),
                  ev(6, "placement", placement="p1", bundles=[{"CPU": 1.5}], nodes=["n0"])]
    assert checkers.never_oversubscribed(ok).valid
    bad = ok + [ev(7, "placement", placement="p2", bundles=[{"CPU": 1.0}], nodes=["n0"])]
    assert checkers.never_oversubscribed(bad).status == "invalid"


def test_malformed_history_is_unknown_not_an_exception():
    verdicts = checkers.check_all([{"event": "worker_start"}])
    assert {v.status for v in verdicts.values()} <= {"unknown", "valid"}
    assert verdicts["every_worker_exits"].status == "unknown"
