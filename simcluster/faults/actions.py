"""The actions of a running fault plan, and how they pick their targets (see `runner.py`).

Each `_do_<kind>(step, action, event, cause)` records its `fault` event (with `cause`: the
step and its trigger) before the fault takes effect, then injects it; it raises
SimclusterError when it has no target, which the plan records as `plan_skipped`. Targets:
a worker is picked among the *running* workers the selector picks (name glob or tags), a
node among the nodes
that are up; several candidates are sorted naturally and one is drawn from the step's own
`random.Random(f"{seed}:{step}")`, so a replay draws the same.
"""

from __future__ import annotations

import random
import time
from fnmatch import fnmatchcase

from .._errors import SimclusterError
from .._spec import NodeSpec
from .plan import selects


class Actions:
    """Mixed into `PlanRun`; uses its driver, provider, plan, history and bookkeeping."""

    # -- actions -----------------------------------------------------------------------------
    def _act(self, i: int, event: dict | None) -> None:
        trigger, act = self.plan.steps[i]
        cause = {"step": i, "trigger": str(trigger)}
        try:
            getattr(self, "_do_" + act.kind)(i, act, event, cause)
        except (SimclusterError, TimeoutError, ValueError) as exc:
            self._skip(i, f"{type(exc).__name__}: {exc}")
        self._finish()

    def _do_kill_worker(self, i, act, event, cause) -> None:
        wid = self._pick_worker(i, act.worker, event)
        self._record(i, "kill_worker", cause, worker=wid, signal=act.signal)
        self.driver.kill_worker(wid, act.signal)

    def _do_raise_in_worker(self, i, act, event, cause) -> None:
        wid = self._pick_worker(i, act.worker, event)
        self._record(i, "raise_in_worker", cause, worker=wid, error=act.error)
        self._send(wid, ("raise", act.error, act.message))

    def _do_fail_upload(self, i, act, event, cause) -> None:
        target = self._trigger_worker(event) if act.worker == "$trigger" else act.worker
        self._record(i, act.kind, cause, worker=target)
        with self._cv:
            self._arms.append((i, target, ("fail", act.error, act.message)))

    def _do_slow_upload(self, i, act, event, cause) -> None:
        target = self._trigger_worker(event) if act.worker == "$trigger" else act.worker
        self._record(i, act.kind, cause, worker=target, seconds=act.seconds)
        with self._cv:
            self._arms.append((i, target, ("slow", act.seconds)))

    def _do_kill_node(self, i, act, event, cause) -> None:
        rec = self._pick_node(i, act.node, event)
        if self.driver.start_kill(rec, "killed", cause):
            self.injected.append({"step": i, "action": "kill_node", "node": rec.node.id})

    def _do_preempt_node(self, i, act, event, cause) -> None:
        rec = self._pick_node(i, act.node, event)
        deadline = time.monotonic() + act.deadline_s
        self._record(i, "preempt_node", cause, node=rec.node.id, deadline_s=act.deadline_s)
        with self._cv:
            self._preempted[rec.node.id] = deadline
            targets = [w for w, (_, node) in self._workers.items() if node == rec.node.id]
        for wid in sorted(targets):
            self._send(wid, ("preempt", deadline))
        self._schedule(deadline, self._follow_up, self._preempted_now, rec)

    def _preempted_now(self, rec) -> None:
        """The deadline: no fault event of its own; node_down says reason="preempted"."""
        if self.driver.start_kill(rec, "preempted", None, None):
            self.driver._await_gone(rec, 10.0)

    def _do_pause_node(self, i, act, event, cause) -> None:
        rec = self._pick_node(i, act.node, event)
        if not self.driver.pause_node(rec.node, True, cause=cause):
            self._skip(i, f"node {rec.node.id} is already paused")
            return
        self.injected.append({"step": i, "action": "pause_node", "node": rec.node.id})
        if act.seconds is not None:
            self._schedule(time.monotonic() + act.seconds, self._follow_up,
                           self.driver.pause_node, rec.node, False,
                           cause={"step": i, "trigger": f"{act.seconds:g}s after the pause"})

    def _do_resume_node(self, i, act, event, cause) -> None:
        rec = self._pick_node(i, act.node, event)
        if not self.driver.pause_node(rec.node, False, cause=cause):
            self._skip(i, f"node {rec.node.id} is not paused")
            return
        self.injected.append({"step": i, "action": "resume_node", "node": rec.node.id})

    def _do_remove_node(self, i, act, event, cause) -> None:
        rec = self._pick_node(i, act.node, event)
        self._record(i, "remove_node", cause, node=rec.node.id, graceful=act.graceful)
        grace = act.grace_s if act.grace_s is not None else self.driver.grace_s
        self.driver.remove_node(rec.node, act.graceful, act.grace_s, 10.0 + grace)

    def _do_add_node(self, i, act, event, cause) -> None:
        self._record(i, "add_node", cause, spec=dict(act.spec))
        self.driver.start_nodes([NodeSpec(**act.spec)], 60.0)

    def _do_partition(self, i, act, event, cause) -> None:
        recs = self._pick_nodes(act.nodes, event)
        nodes = [rec.node.id for rec in recs]
        self._record(i, "partition", cause, nodes=nodes)
        for rec in recs:
            self.provider.set_cut(rec.node, True)
        with self.driver.lock:
            self.driver.cut_nodes.update(nodes)
        with self._cv:
            self._cut.update(nodes)
        if act.seconds is not None:
            self._schedule(time.monotonic() + act.seconds, self._follow_up, self._heal, i, nodes)

    def _do_heal(self, i, act, event, cause) -> None:
        with self.driver.lock:
            cut = sorted(self.driver.cut_nodes)  # whichever plan cut them
        nodes = [n for n in cut if any(fnmatchcase(n, p) for p in act.nodes)]
        self._record(i, "heal", cause, nodes=nodes)
        self._heal(i, nodes)

    def _heal(self, i: int, nodes: list[str]) -> None:
        for node_id in nodes:
            self.provider.set_cut(self.driver.node_rec(node_id).node, False)
        with self.driver.lock:
            self.driver.cut_nodes.difference_update(nodes)
        with self._cv:
            self._cut.difference_update(nodes)
        self.history.record("heal", nodes=nodes, step=i)

    # -- targets -----------------------------------------------------------------------------
    def _trigger_worker(self, event: dict | None) -> str:
        wid = (event or {}).get("worker")
        if wid is None:
            raise SimclusterError("worker='$trigger': the trigger is not a worker's event")
        return wid

    def _pick_worker(self, i: int, pattern: str, event: dict | None) -> str:
        with self._cv:
            if pattern == "$trigger":
                found = [w for w in [self._trigger_worker(event)] if w in self._workers]
            else:
                found = [w for w, (name, _) in self._workers.items()
                         if selects(pattern, name, self._tags.get(w, {}))]
        if not found:
            raise SimclusterError(f"no running worker matches worker={pattern!r}")
        return self._choose(i, sorted(found, key=_natural))

    def _pick_node(self, i: int, pattern: str, event: dict | None):
        return self._choose(i, self._pick_nodes([pattern], event))

    def _pick_nodes(self, patterns, event: dict | None) -> list:
        with self.driver.lock:
            live = {rec.node.id: rec for rec in self.driver.nodes.values()
                    if rec.node.state != "down"}
        with self._cv:
            wanted = set()
            for pattern in patterns:
                if pattern == "$trigger":
                    event = event or {}
                    wanted.add(event.get("node") or
                               self._names.get(event.get("worker"), (None, None))[1])
                elif pattern.startswith("worker:"):
                    wanted.update(node for w, (name, node) in self._workers.items()
                                  if selects(pattern[7:], name, self._tags.get(w, {})))
                else:
                    wanted.update(n for n in live if fnmatchcase(n, pattern))
        found = [live[n] for n in sorted(wanted & set(live), key=_natural)]
        if not found:
            raise SimclusterError(f"no node that is up matches {list(patterns)}")
        return found

    def _choose(self, i: int, candidates: list):
        if len(candidates) == 1:
            return candidates[0]
        return random.Random(f"{self.plan.seed}:{i}").choice(candidates)


def _natural(name: str):
    """'worker-10' after 'worker-9'."""
    head, _, tail = name.rpartition("-")
    return (head, int(tail)) if tail.isdigit() else (name, -1)
