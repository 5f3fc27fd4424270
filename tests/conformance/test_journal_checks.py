"""The journal checkers must call bad journals invalid (they are the suite's eyes)."""

from conformance import journal_checks as jc


def start(rank, attempt=0, world=2, node="n0", local=None, lws=None, node_rank=0, restored=None):
    return {"ev": "start", "rank": rank, "attempt": attempt, "world_size": world,
            "node_id": node, "local_rank": rank if local is None else local,
            "local_world_size": world if lws is None else lws, "node_rank": node_rank,
            "restored": None if restored is None else {"step": restored}}


def report(rank, step, attempt=0, ckpt=True):
    return {"ev": "report", "rank": rank, "step": step, "attempt": attempt, "checkpoint": ckpt}


def reported(rank, step, attempt=0):
    return {"ev": "reported", "rank": rank, "step": step, "attempt": attempt}


def test_ranks_complete():
    assert jc.ranks_complete([start(0), start(1)]).valid
    assert jc.ranks_complete([start(0), start(0)]).status == "invalid"
    assert jc.ranks_complete([start(0), start(2)]).status == "invalid"
    assert jc.ranks_complete([start(0, world=2), start(1, world=3)]).status == "invalid"
    assert jc.ranks_complete([]).status == "unknown"


def test_contiguous_per_node():
    good = [start(0, world=4, node="a", local=0, lws=2),
            start(1, world=4, node="a", local=1, lws=2),
            start(2, world=4, node="b", local=0, lws=2, node_rank=1),
            start(3, world=4, node="b", local=1, lws=2, node_rank=1)]
    assert jc.contiguous_per_node(good).valid
    interleaved = [dict(e) for e in good]
    interleaved[1]["node_id"], interleaved[2]["node_id"] = "b", "a"
    assert jc.contiguous_per_node(interleaved).status == "invalid"
    bad_node_rank = [dict(e) for e in good]
    bad_node_rank[2]["node_rank"] = bad_node_rank[3]["node_rank"] = 0
    assert jc.contiguous_per_node(bad_node_rank).status == "invalid"
    bad_local = [dict(e) for e in good]
    bad_local[3]["local_rank"] = 3
    assert jc.contiguous_per_node(bad_local).status == "invalid"
    unknown = [dict(e, node_id=None) for e in good]
    assert jc.contiguous_per_node(unknown).status == "unknown"


def test_world_size_within():
    assert jc.world_size_within([start(0, world=2), start(1, world=2)], 1, 4).valid
    assert jc.world_size_within([start(0, world=5)], 1, 4).status == "invalid"


def _acked_run(restored_step):
    return [start(0), start(1),
            report(0, 0), report(1, 0), reported(0, 0), reported(1, 0),
            report(0, 1), report(1, 1), reported(0, 1), reported(1, 1),
            report(0, 2), report(1, 2), reported(0, 2),  # rank 1 never returned from step 2
            start(0, attempt=1, restored=restored_step),
            start(1, attempt=1, restored=restored_step)]


def test_acknowledged_steps():
    assert jc.acknowledged_steps(_acked_run(1), 0) == [0, 1]


def test_restores_latest():
    assert jc.restores_latest(_acked_run(1)).valid
    assert jc.restores_latest(_acked_run(2)).valid  # newer, unacknowledged: allowed
    assert jc.restores_latest(_acked_run(0)).status == "invalid"
    assert jc.restores_latest(_acked_run(None)).status == "invalid"
    split = _acked_run(1)
    split[-1] = start(1, attempt=1, restored=2)
    assert jc.restores_latest(split).status == "invalid"
    assert jc.restores_latest([start(0)]).status == "unknown"


def test_restores_latest_acknowledged_by_counts_only_what_returned_by_then():
    # steps 0 and 1 returned on both ranks at t=1 and t=2; a node was killed at t=2.5
    # (a fault from outside the ranks); the restart restored step 0
    events = [dict(e, t=1.0 + e["step"]) if e["ev"] == "reported" else e
              for e in _acked_run(0)]
    assert jc.acknowledged_steps(events, 0, by=1.5) == [0]
    assert jc.restores_latest(events).status == "invalid"  # step 1 was acknowledged
    assert jc.restores_latest(events, acknowledged_by=1.5).valid  # not yet by 1.5
    assert jc.restores_latest(events, acknowledged_by=2.0).status == "invalid"


def test_restores_latest_in_flight_leaves_out_each_ranks_newest_report():
    # both ranks returned from steps 0 and 1; the restart restored step 0
    events = [e for e in _acked_run(0) if e.get("step") != 2]
    assert jc.acknowledged_steps(events, 0) == [0, 1]
    assert jc.acknowledged_steps(events, 0, in_flight=1) == [0]
    assert jc.restores_latest(events).status == "invalid"
    assert jc.restores_latest(events, in_flight=1).valid
    # in _acked_run rank 1's newest returned report is step 1: only step 0 is certain
    assert jc.acknowledged_steps(_acked_run(0), 0, in_flight=1) == [0]
    assert jc.restores_latest([dict(e) for e in _acked_run(None)], in_flight=1).status \
        == "invalid"


def test_checkpoints_whole(tmp_path):
    import json

    run = tmp_path / "run"
    (run / "ckpt-0000").mkdir(parents=True)
    (run / ".tmp-stage").mkdir()  # temporaries are not checkpoints
    for r in (0, 1):
        (run / "ckpt-0000" / f"shard-{r}.json").write_text(json.dumps({"step": 0}))
    events = [report(0, 0), report(1, 0)]
    assert jc.checkpoints_whole(events, str(run)).valid
    (run / "ckpt-0000" / "shard-1.json").write_text('{"st')
    assert jc.checkpoints_whole(events, str(run)).status == "invalid"
    (run / "ckpt-0000" / "shard-1.json").unlink()
    v = jc.checkpoints_whole(events, str(run))
    assert v.status == "invalid" and "ranks [1]" in v.reason
    assert jc.checkpoints_whole(events, str(tmp_path / "nope")).status == "unknown"


def test_checkpoints_whole_accepts_a_folder_several_reports_named(tmp_path):
    import json

    run = tmp_path / "run"
    (run / "same").mkdir(parents=True)
    (run / "same" / "shard-0.json").write_text(json.dumps({"step": 1}))
    (run / "same" / "shard-1.json").write_text(json.dumps({"step": 0}))
    named = [dict(report(0, 0), dir_name="same"), dict(report(1, 0), dir_name="r1-x"),
             dict(report(0, 1), dir_name="same")]
    assert jc.checkpoints_whole(named, str(run)).valid
    # without the journal saying both steps named it, mixed steps are a torn folder
    v = jc.checkpoints_whole([report(0, 0), report(1, 0), report(0, 1)], str(run))
    assert v.status == "invalid" and "mixes shards of steps [0, 1]" in v.reason
    # a shard of a step that did not name the folder is still a mix
    (run / "same" / "shard-1.json").write_text(json.dumps({"step": 2}))
    assert jc.checkpoints_whole(named, str(run)).status == "invalid"
    # the latest step's writers must all have their shard
    (run / "same" / "shard-1.json").unlink()
    named.append(dict(report(1, 1), dir_name="r1-x"))
    v = jc.checkpoints_whole(named, str(run))
    assert v.status == "invalid" and "ranks [1]" in v.reason
