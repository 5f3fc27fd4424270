"""A picture of a run: a history's events as lanes of spans and marks (`simcluster history
FILE --plot out.png|out.html`).

`build(events)` is a pure model; `to_png` (matplotlib) and `to_html` (one self-contained
file of inline SVG) draw it and return counts of what they drew, so tests compare counts
instead of pixels.

Lanes, top to bottom: the nodes ("node-0", "node-1", ... by index), then "run" (only when
there are run-wide marks), then one lane per worker lane. A worker's lane is "rank <r>" when
its `worker_start` carries tags with "rank" (the attempts of one rank share a row: a restart
reads as a gap in that row), else its name; rank lanes come first, by rank, then the others
in the order they started. simcluster knows nothing of training: "rank" is only a tag name.

Spans: a node is "up" from node_up, "paused" between node_paused and node_resumed, and ends
at node_down; a worker is "running" from worker_start to worker_exit. What has not ended
runs to the last event. Times are seconds after the first event.

Marks, one per event (kind: events):
    report      train.report without a checkpoint              on "run"
    checkpoint  train.report with a checkpoint (instead of a report mark)     on "run"
    restart     train.attempt_start with attempt > 0           on "run"
    resize      train.resize                                   on "run"
    failure     train.failure                                  on "run"
    failure     worker_exit other than code 0 with reason "exited" (or "shutdown": the
                cluster closing)                                   on the worker's lane
    fault       fault: on its worker's lane, else its node's, else "run"
    node_down   node_down, except reason "shutdown" (the cluster closing)   on the node's lane
A run-wide mark has `lane` None in the model; the renderers draw it on the "run" lane.
"""

from __future__ import annotations

import html
import math
import re
import signal
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

MARK_KINDS = ("report", "checkpoint", "restart", "resize", "failure", "fault", "node_down")
RUN_LANE = "run"
PLOT_SUFFIXES = (".png", ".html")

# kind -> (colour, matplotlib marker, SVG shape); Okabe-Ito colours read under colour blindness.
_STYLE = {
    "report": ("#0072B2", "o", "circle"), "checkpoint": ("#009E73", "s", "square"),
    "restart": ("#CC79A7", ">", "right"), "resize": ("#56B4E9", "D", "diamond"),
    "failure": ("#D55E00", "X", "cross"), "fault": ("#E69F00", "^", "up"),
    "node_down": ("#000000", "v", "down"),
}
_SPAN_COLOUR = {"up": "#d9d9d9", "paused": "#F0E442", "running": "#9cc3e6"}


@dataclass(frozen=True)
class Span:
    lane: str
    start: float
    end: float
    kind: str  # "up" | "paused" (nodes), "running" (workers)
    label: str = ""  # the worker or node id


@dataclass(frozen=True)
class Mark:
    lane: str | None  # None: run-wide, drawn on the "run" lane
    t: float
    kind: str  # one of MARK_KINDS
    label: str
    fields: dict = field(default_factory=dict, compare=False)  # the event, for tooltips


@dataclass(frozen=True)
class Timeline:
    lanes: list[str]
    spans: list[Span]
    marks: list[Mark]
    duration: float

    def counts(self) -> dict:
        """{"lanes": n, "spans": n, "marks": {kind: n}} (kinds present only)."""
        kinds = Counter(m.kind for m in self.marks)
        return {"lanes": len(self.lanes), "spans": len(self.spans),
                "marks": {k: kinds[k] for k in MARK_KINDS if kinds[k]}}


def _index(name: str) -> tuple[int, str]:
    found = re.search(r"(\d+)$", name)
    return (int(found.group(1)) if found else -1, name)


def _failed_how(e: dict) -> str | None:
    """None for a clean exit, else a few words on why the worker ended."""
    if e.get("reason") == "shutdown" or (e.get("code") == 0
                                         and e.get("reason", "exited") == "exited"):
        return None  # a clean exit, or the cluster closing (not an event of the run)
    if e.get("signal"):
        try:
            how = f"killed by {signal.Signals(e['signal']).name}"
        except ValueError:
            how = f"killed by signal {e['signal']}"
    else:
        how = f"exit code {e.get('code')}"
    return how if e.get("reason", "exited") == "exited" else f"{how} ({e['reason']})"


def build(events: list[dict]) -> Timeline:
    """The lanes, spans and marks of a history's events (see the module note)."""
    if not events:
        return Timeline([], [], [], 0.0)
    t0 = events[0]["t"]
    duration = events[-1]["t"] - t0
    worker_lane: dict[str, str] = {}
    ranks: dict[str, object] = {}
    for e in events:  # first pass: lanes of workers, so a mark can name a later one
        if e["event"] == "worker_start":
            tags = e.get("tags") or {}
            lane = f"rank {tags['rank']}" if "rank" in tags else e.get("name") or e["worker"]
            worker_lane[e["worker"]] = lane
            ranks.setdefault(lane, tags.get("rank"))
    spans: list[Span] = []
    marks: list[Mark] = []
    node_open: dict[str, tuple[float, str]] = {}  # node -> (since, "up" | "paused")
    worker_open: dict[str, float] = {}

    def close_node(node: str, t: float) -> None:
        since, kind = node_open.pop(node)
        spans.append(Span(node, since, t, kind, node))

    def mark(lane, t, kind, label, e):
        fields = {k: v for k, v in e.items() if k not in ("t", "seq")}
        marks.append(Mark(lane, t, kind, label, fields))

    for e in events:
        name, t = e["event"], e["t"] - t0
        node, worker = e.get("node"), e.get("worker")
        if name == "node_up":
            node_open[node] = (t, "up")
        elif name in ("node_paused", "node_resumed") and node in node_open:
            close_node(node, t)
            node_open[node] = (t, "paused" if name == "node_paused" else "up")
        elif name == "node_down":
            if node in node_open:
                close_node(node, t)
            if e.get("reason") != "shutdown":  # the cluster closing is no event of the run
                mark(node, t, "node_down", f"{node} down ({e.get('reason')})", e)
        elif name == "worker_start":
            worker_open[worker] = t
        elif name == "worker_exit":
            if worker in worker_open:
                spans.append(Span(worker_lane[worker], worker_open.pop(worker), t, "running",
                                  worker))
            how = _failed_how(e)
            if how is not None:
                mark(worker_lane.get(worker, worker), t, "failure", f"{worker} {how}", e)
        elif name == "fault":
            lane = worker_lane.get(worker, worker) if worker else node
            target = f" {worker or node}" if worker or node else ""
            mark(lane, t, "fault", f"fault {e.get('action')}{target}", e)
        elif name == "train.report":
            kind = "checkpoint" if e.get("checkpoint") is not None else "report"
            mark(None, t, kind, f"report {e.get('report')} (attempt {e.get('attempt')}, "
                                f"round {e.get('round')})", e)
        elif name == "train.attempt_start" and (e.get("attempt") or 0) > 0:
            mark(None, t, "restart", f"attempt {e['attempt']} "
                                     f"(world size {e.get('world_size')})", e)
        elif name == "train.resize":
            mark(None, t, "resize", f"resize {e.get('old_size')} -> {e.get('new_size')}", e)
        elif name == "train.failure":
            mark(None, t, "failure", f"failure of ranks {e.get('ranks')}: "
                                     f"{e.get('decision')}", e)
    for node in list(node_open):
        close_node(node, duration)
    spans += [Span(worker_lane[w], since, duration, "running", w)
              for w, since in worker_open.items()]
    nodes = sorted({s.lane for s in spans if s.kind != "running"}
                   | {m.lane for m in marks if m.kind == "node_down"}, key=_index)
    worker_lanes = list(dict.fromkeys(worker_lane.values()))
    worker_lanes.sort(key=lambda lane: (ranks[lane] is None, _rank_key(ranks[lane])))
    run = [RUN_LANE] if any(m.lane is None for m in marks) else []
    lanes = nodes + run + worker_lanes
    lanes += list(dict.fromkeys(m.lane for m in marks if m.lane and m.lane not in lanes))
    return Timeline(lanes, spans, marks, duration)


def _rank_key(rank) -> tuple:
    # ranks are ints from the reference, but tags are any scalar: sort numbers first
    return (0, rank, "") if isinstance(rank, (int, float)) else (1, 0, str(rank))


def plot_format(path) -> str:
    """'png' or 'html' from `path`'s suffix; a ValueError naming the allowed ones otherwise."""
    suffix = Path(path).suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise ValueError(f"--plot {str(path)!r}: the suffix must be one of "
                         f"{', '.join(PLOT_SUFFIXES)} (got {suffix or 'none'!r})")
    return suffix[1:]


def render(timeline: Timeline, path) -> dict:
    """Draw `timeline` to `path` (.png or .html), creating its folder; the drawn counts."""
    kind = plot_format(path)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return to_png(timeline, path) if kind == "png" else to_html(timeline, path)


def _row(timeline: Timeline, lane: str | None) -> int:
    return timeline.lanes.index(lane if lane is not None else RUN_LANE)


def to_png(timeline: Timeline, path) -> dict:
    """A PNG picture (matplotlib, Agg); the counts of lanes, spans and marks drawn."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(f"simcluster history --plot PATH.png needs matplotlib ({exc}); "
                          'install it with `pip install "trainspec[cli]"`') from exc
    n = len(timeline.lanes)
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.42 * max(n, 1)), dpi=100)
    try:
        drawn_spans, drawn = 0, Counter()
        for kind, colour in _SPAN_COLOUR.items():
            mine = [s for s in timeline.spans if s.kind == kind]
            if mine:
                bars = ax.barh([_row(timeline, s.lane) for s in mine],
                               [max(s.end - s.start, 1e-9) for s in mine],
                               left=[s.start for s in mine], height=0.6, color=colour,
                               edgecolor="#666666", linewidth=0.5, label=kind)
                drawn_spans += len(bars.patches)
        for kind in MARK_KINDS:
            mine = [m for m in timeline.marks if m.kind == kind]
            if mine:
                colour, marker, _ = _STYLE[kind]
                dots = ax.scatter([m.t for m in mine], [_row(timeline, m.lane) for m in mine],
                                  marker=marker, color=colour, s=55, zorder=3, label=kind,
                                  edgecolors="white", linewidths=0.5)
                drawn[kind] = len(dots.get_offsets())
        ax.set_yticks(range(n), timeline.lanes)
        ax.set_ylim(n - 0.5, -0.5)  # first lane at the top
        ax.set_xlim(0, max(timeline.duration, 1e-3) * 1.02)
        ax.set_xlabel("seconds since the first event")
        ax.grid(axis="x", color="#eeeeee")
        ax.set_axisbelow(True)
        if drawn or drawn_spans:
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small",
                      frameon=False)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return {"lanes": n, "spans": drawn_spans,
            "marks": {k: drawn[k] for k in MARK_KINDS if drawn[k]}}


def _svg_shape(kind: str, x: float, y: float, tip: str, role: str = "mark") -> str:
    """One mark as an SVG element of class "<role> <kind>" with a tooltip."""
    colour, _, shape = _STYLE[kind]
    r = 6
    title = f"<title>{html.escape(tip)}</title>" if tip else ""
    attrs = f'class="{role} {kind}" fill="{colour}" stroke="white" stroke-width="1"'
    if shape == "circle":
        return f'<circle {attrs} cx="{x:.1f}" cy="{y:.1f}" r="{r}">{title}</circle>'
    if shape == "square":
        return (f'<rect {attrs} x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r}" '
                f'height="{2 * r}">{title}</rect>')
    if shape == "cross":
        d = (f"M{x - r:.1f},{y - r:.1f}L{x + r:.1f},{y + r:.1f}"
             f"M{x - r:.1f},{y + r:.1f}L{x + r:.1f},{y - r:.1f}")
        return (f'<path class="{role} {kind}" d="{d}" stroke="{colour}" stroke-width="3" '
                f'fill="none">{title}</path>')
    points = {"right": [(-r, -r), (r, 0), (-r, r)], "down": [(-r, -r), (r, -r), (0, r)],
              "up": [(-r, r), (r, r), (0, -r)],
              "diamond": [(0, -r), (r, 0), (0, r), (-r, 0)]}[shape]
    d = "M" + "L".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in points) + "Z"
    return f'<path {attrs} d="{d}">{title}</path>'


def _tick_step(duration: float) -> float:
    """A 1-2-5 step that puts about eight ticks on the axis."""
    raw = max(duration, 1e-3) / 8
    scale = 10 ** math.floor(math.log10(raw))
    return next(step * scale for step in (1, 2, 5, 10) if step * scale >= raw)


def to_html(timeline: Timeline, path) -> dict:
    """One self-contained HTML file (inline SVG, no scripts); the counts drawn."""
    left, width, top, row_h = 120, 900, 10, 30
    n = len(timeline.lanes)
    height = top + row_h * n + 40
    scale = width / (max(timeline.duration, 1e-3) * 1.02)
    x = lambda t: left + t * scale  # noqa: E731
    y = lambda lane: top + row_h * _row(timeline, lane) + row_h / 2  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 20}" '
           f'height="{height}" font-family="sans-serif" font-size="12">']
    for i, lane in enumerate(timeline.lanes):
        out.append(f'<g class="lane"><rect class="row" x="{left}" y="{top + row_h * i}" '
                   f'width="{width}" height="{row_h}" fill="{"#fafafa" if i % 2 else "#fff"}"/>'
                   f'<text class="lane-label" x="{left - 8}" y="{top + row_h * i + 19}" '
                   f'text-anchor="end">{html.escape(lane)}</text></g>')
    drawn_spans, drawn = 0, Counter()
    for s in timeline.spans:
        tip = f"{s.label} {s.kind} {s.start:+.3f}s .. {s.end:+.3f}s"
        out.append(f'<rect class="span {s.kind}" x="{x(s.start):.1f}" y="{y(s.lane) - 9:.1f}" '
                   f'width="{max((s.end - s.start) * scale, 1):.1f}" height="18" '
                   f'fill="{_SPAN_COLOUR.get(s.kind, "#ccc")}" stroke="#666" '
                   f'stroke-width="0.5"><title>{html.escape(tip)}</title></rect>')
        drawn_spans += 1
    for m in timeline.marks:
        tip = "\n".join([f"{m.label} at {m.t:+.3f}s",
                         *(f"{k}: {v}" for k, v in m.fields.items())])
        out.append(_svg_shape(m.kind, x(m.t), y(m.lane), tip))
        drawn[m.kind] += 1
    step, axis_y = _tick_step(timeline.duration), top + row_h * n
    ticks = [i * step for i in range(int(timeline.duration * 1.02 / step) + 1)]
    out.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + width}" y2="{axis_y}" '
               'stroke="#333"/>')
    out += [f'<text class="tick" x="{x(t):.1f}" y="{axis_y + 15}" text-anchor="middle">'
            f'{t:g}</text>' for t in ticks]
    out.append(f'<text x="{left + width / 2}" y="{axis_y + 32}" text-anchor="middle">'
               'seconds since the first event</text></svg>')
    legend = [f'<li><svg width="14" height="14"><rect class="swatch {k}" width="14" '
              f'height="14" fill="{c}"/></svg> {k}</li>' for k, c in _SPAN_COLOUR.items()]
    legend += [f'<li><svg width="14" height="14">{_svg_shape(k, 7, 7, "", "swatch")}</svg> '
               f'{k}</li>' for k in MARK_KINDS]
    Path(path).write_text(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>simcluster run timeline"
        "</title><style>body{font-family:sans-serif;margin:16px}ul.legend{list-style:none;"
        "padding:0;display:flex;flex-wrap:wrap;gap:14px}ul.legend svg{vertical-align:middle}"
        "</style></head><body>\n<h1>simcluster run timeline</h1>\n<ul class=\"legend\">"
        + "".join(legend) + "</ul>\n" + "\n".join(out) + "\n</body></html>\n",
        encoding="utf-8")
    return {"lanes": n, "spans": drawn_spans,
            "marks": {k: drawn[k] for k in MARK_KINDS if drawn[k]}}
