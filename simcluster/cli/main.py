"""`simcluster` / `python -m simcluster`: run a script on a simulated cluster; read a history.

    simcluster run [--nodes 2x4cpu,1x2gpu] [--faults plan.json] [--provider process]
                   [--history PATH] [--quiet] script.py [args ...]
    simcluster history FILE [--messages] [--events node_up,fault,...] [--plot out.png|.html]

`run` starts the cluster (and the fault plan, from the cluster's start so that its node_up
triggers see the first nodes), runs `python script.py args` with SIMCLUSTER_ADDRESS set
(`reference.init()` / `init(address="auto")` connect to it), shows nodes, workers and faults
as they happen (a live panel with `rich` on a terminal, plain lines otherwise), prints where
the history is (`--history`, else a new file in the per-user state folder: see
`simcluster._state`), and exits with the script's code. SIGINT / SIGTERM go to the script
first. The script, and everything it starts, ends with `simcluster run`, even one that is
SIGKILLed (`keeper.py`).

Node groups: `[COUNTx]ITEM[+ITEM...][:TYPE]`, ITEM one of `<n>cpu`, `<n>gpu`, `<n>tpu`;
e.g. `2x4cpu` (two nodes of 4 CPUs), `1x8cpu+2gpu:A100`. A group without CPUs gets one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys

from .. import Cluster, FaultPlan, History, NodeSpec, SimclusterError
from .._history import EVENTS
from .keeper import Keeper
from .progress import make_progress

_ITEM = re.compile(r"^(\d+(?:\.\d+)?)(cpus?|gpus?|tpus?)$")


def parse_nodes(text: str) -> list[NodeSpec]:
    """'2x4cpu,1x2gpu' -> [NodeSpec(cpus=4), NodeSpec(cpus=4), NodeSpec(cpus=1, gpus=2)]."""
    specs: list[NodeSpec] = []
    for group in filter(None, (g.strip() for g in text.split(","))):
        counted = re.match(r"^(\d+)x(.*)$", group)
        count, body = counted.groups() if counted else ("1", group)
        body, _, accel_type = body.partition(":")
        fields: dict = {"cpus": 0, "gpus": 0, "tpus": 0}
        for item in body.split("+"):
            found = _ITEM.match(item.strip().lower())
            if not found:
                raise ValueError(f"--nodes {text!r}: cannot read {item!r} in {group!r}; expected "
                                 "e.g. '2x4cpu', '1x8cpu+2gpu' or '1x2gpu:A100'")
            key = found.group(2).rstrip("s") + "s"
            amount = float(found.group(1))
            fields[key] += amount if key == "cpus" else int(amount)
        fields["cpus"] = fields["cpus"] or 1
        if accel_type:
            fields["accelerator_type"] = accel_type
        specs += [NodeSpec(**fields) for _ in range(int(count))]
    if not specs:
        raise ValueError(f"--nodes {text!r}: no nodes")
    return specs


#: `simcluster run`'s own exit status when the script succeeded but a planned fault never
#: acted (its trigger never came, or it found no target) and the step was not optional.
EXIT_UNFIRED = 3


def _run(args) -> int:
    specs = parse_nodes(args.nodes)
    plan = FaultPlan.load(args.faults) if args.faults else None
    if not os.path.exists(args.script):
        print(f"simcluster run: no such script: {args.script}", file=sys.stderr)
        return 2
    # The script runs below a keeper (keeper.py): it, and all it starts, die with this
    # process, even by SIGKILL. The keeper starts while the cluster does.
    keeper = Keeper([sys.executable, args.script, *args.args])
    code, interrupted, cluster, progress = None, [], None, None
    try:
        cluster = Cluster(nodes=specs, provider=args.provider, history_path=args.history,
                          faults=plan)
        history_path = cluster.history.path
        progress = make_progress(cluster.history, quiet=args.quiet, stream=sys.stderr)
        print(f"simcluster: {len(specs)} nodes up at {cluster.address} "
              f"(provider {cluster.provider.name}); history: {history_path}", file=sys.stderr)

        # The keeper has a process group of its own: a Ctrl-C reaches the script once,
        # from here, not twice (from the terminal and forwarded); a second one kills it.
        def forward(sig, _frame):
            if sig == signal.SIGINT and interrupted:
                keeper.release()
                return
            interrupted.append(sig)
            keeper.proc.send_signal(sig)

        old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            keeper.start(cluster.address)
            code = keeper.proc.wait()
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
    finally:
        keeper.end()  # a script still running (this failed) goes, with all it started
        if progress is not None:
            progress.close()
        if cluster is not None:
            cluster.close()
    status = 128 - code if code < 0 else code  # what a shell reports for the script
    events = History.read(history_path)
    faults = sum(e["event"] == "fault" for e in events)
    how = (f"was stopped by {signal.Signals(-code).name} (exit status {status})" if code < 0
           else f"exited with {status}")
    print(f"simcluster: the script {how}; {len(events)} events, {faults} faults; "
          f"history: {history_path} (read it with `simcluster history {history_path}`)",
          file=sys.stderr)
    missed = [e for e in events if e["event"] == "plan_unfired"]
    for e in missed:
        note = "optional, so not a failure" if e["optional"] else "the run fails"
        print(f"simcluster: fault plan step {e['step']} ({e['action']} at {e['trigger']}) "
              f"never acted: {e['why']} ({note})", file=sys.stderr)
    if status == 0 and any(not e["optional"] for e in missed):
        print(f"simcluster: exit status {EXIT_UNFIRED}: the script passed, but not every "
              "planned fault happened, so the run did not test what the plan says (mark a "
              "step \"optional\": true if it may not happen)", file=sys.stderr)
        return EXIT_UNFIRED
    return status


def format_event(event: dict, t0: float) -> str:
    fields = " ".join(f"{k}={_short(v)}" for k, v in event.items()
                      if k not in ("t", "seq", "event"))
    return f"{event['t'] - t0:+10.3f}s  {event['event']:<18} {fields}".rstrip()


def _short(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _history(args) -> int:
    from . import timeline  # only `history` needs it

    if args.plot:
        try:
            timeline.plot_format(args.plot)  # before printing anything
        except ValueError as exc:
            print(f"simcluster history: {exc}", file=sys.stderr)
            return 2
    try:
        events = History.read(args.file)
    except (OSError, ValueError) as exc:
        print(f"simcluster history: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    wanted = set(filter(None, args.events.split(","))) if args.events else None
    if wanted is not None:
        known = set(EVENTS) | {e["event"] for e in events}
        unknown = sorted(wanted - known)
        if unknown:
            print(f"simcluster history: --events {args.events!r}: unknown event name(s) "
                  f"{unknown}; valid: {', '.join(sorted(known))} (simcluster's events, and "
                  "those of a layer above found in this file)", file=sys.stderr)
            return 2
    t0 = events[0]["t"] if events else 0.0
    hidden = 0
    for event in events:
        if wanted is not None and event["event"] not in wanted:
            continue
        if event["event"] == "message" and not args.messages and wanted is None:
            hidden += 1
            continue
        print(format_event(event, t0))
    if hidden:
        print(f"({hidden} message events not shown; --messages shows them)")
    if args.plot:
        try:
            drawn = timeline.render(timeline.build(events), args.plot)
        except ImportError as exc:  # matplotlib missing: the message says what to install
            print(f"simcluster history: {exc}", file=sys.stderr)
            return 2
        print(f"simcluster history: wrote {args.plot} ({drawn['lanes']} lanes, "
              f"{sum(drawn['marks'].values())} marks)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="simcluster", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run", help="run a Python script on a simulated cluster",
        description="Start a cluster, run `python SCRIPT ARGS` against it (SIMCLUSTER_ADDRESS "
                    "is set: reference.init() connects), inject the fault plan, and exit with "
                    "the script's status; 3 if it passed but a planned fault never acted "
                    "(unless that step is optional). A Ctrl-C goes to the script once; a "
                    "second one kills it.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    run.add_argument("--nodes", default="1x4cpu",
                     help="node groups: [COUNTx]ITEM[+ITEM...][:TYPE], ITEM <n>cpu, <n>gpu or "
                          "<n>tpu; e.g. 2x4cpu,1x8cpu+2gpu:A100")
    run.add_argument("--faults", metavar="PLAN", default=None,
                     help="a fault plan file, YAML (.yaml/.yml) or JSON, in the format of "
                          "simcluster/faults/plan.schema.json (docs/fault_plans.md); e.g. "
                          "steps: [{trigger: {event: train.report, match: {report: 3}}, "
                          "action: {kind: kill_worker, worker: 'rank=1'}}]")
    run.add_argument("--provider", default="process", choices=["process", "netns", "docker"],
                     help="what a node is: local processes, processes in network namespaces "
                          "(needed by partition steps; root), or Docker containers")
    run.add_argument("--history", default=None,
                     help="history file; None: a new file in $SIMCLUSTER_STATE_DIR/history or "
                          "~/.local/state/simcluster/history")
    run.add_argument("--quiet", action="store_true",
                     help="no progress display (a live panel on a terminal, else one line per "
                          "notable event)")
    run.add_argument("script", help="the Python script to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")
    hist = sub.add_parser(
        "history", help="print a history file as a timeline",
        description="Print a cluster's history (simcluster run prints where it is) as one line "
                    "per event, times relative to the first; optionally draw it.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    hist.add_argument("file", help="a history file (JSON lines)")
    hist.add_argument("--messages", action="store_true",
                      help="include message events (hidden unless --events names them)")
    hist.add_argument("--events", default=None,
                      help="only these events, comma-separated (e.g. fault,worker_exit,"
                           "train.report); an unknown name is an error listing the valid ones")
    hist.add_argument("--plot", metavar="PATH", default=None,
                      help="also draw the whole history (lanes of nodes, the run, workers by "
                           "rank) to PATH: .png (matplotlib) or .html (inline SVG)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return _run(args) if args.command == "run" else _history(args)
    except (ValueError, TypeError, OSError, SimclusterError) as exc:
        print(f"simcluster {args.command}: {exc}", file=sys.stderr)
        return 2
