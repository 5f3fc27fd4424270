"""Conformance reports: per-check and per-clause statuses as JSON, Markdown and HTML.

Statuses: pass, fail, xfail (failed as the expectations file says), xpass (passed although
expected to fail), skip, hang (did not finish before its deadline), error (the suite's own
instruments failed, so the run was not judged; not counted against the implementation). A
clause takes the worst status of its checks: hang > fail > error > xfail > skip > xpass > pass.

Each entry of `checks` holds: `id` (relative to conformance/checks/), `status`, `clauses`
(the ids the check names), `reason` (one line for the tables), `error` and `message` (the
type name and text of what the check raised, cut at 2000 characters; null when it raised
nothing), `phase` (pytest's "setup" when the failure came before the check body, e.g. from
the adapter, else "call") and `duration_s`.

`html(reports)` draws the requirement x implementation matrix (one row per clause, one column
per report) as one self-contained page: no scripts, no external styles, so it can be
attached to a CI run or opened from disk.
"""

from __future__ import annotations

import json
import platform
import sys
import time

from conformance.catalogue import CLAUSES

ORDER = ["hang", "fail", "error", "xfail", "skip", "xpass", "pass"]
SYMBOL = {"pass": "pass", "xpass": "pass (xpass)", "fail": "FAIL", "xfail": "xfail",
          "skip": "skip", "hang": "HANG", "error": "suite error", "untested": "untested"}


def clause_status(checks: list[dict]) -> str:
    if not checks:
        return "untested"
    return min((c["status"] for c in checks), key=ORDER.index)


def build(impl: str, version: str, adapter: str, seed, profile: str, checks: list[dict],
          wall_s: float) -> dict:
    by_clause: dict[str, list[dict]] = {cid: [] for cid in CLAUSES}
    for check in checks:
        for cid in check["clauses"]:
            by_clause.setdefault(cid, []).append(check)
    clauses = {}
    for cid, cs in by_clause.items():
        c = CLAUSES.get(cid)
        clauses[cid] = {
            "level": c.level if c else "?",
            "title": c.title if c else "?",
            "status": clause_status(cs),
            "checks": [x["id"] for x in cs],
            "reasons": sorted({x["reason"] for x in cs if x["status"] != "pass" and x["reason"]}),
        }
        hardware = sorted({x["hardware"] for x in cs if x.get("hardware")})
        if hardware:  # accelerator clauses: on real devices, declared ones, or both
            clauses[cid]["hardware"] = "+".join(hardware)
    totals: dict[str, int] = {}
    for c in clauses.values():
        totals[c["status"]] = totals.get(c["status"], 0) + 1
    return {
        "implementation": impl, "version": version, "adapter": adapter,
        "hypothesis_seed": seed, "hypothesis_profile": profile,
        "platform": f"{platform.platform()} python {sys.version.split()[0]}",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "wall_s": round(wall_s, 1),
        "totals": totals, "clauses": clauses, "checks": checks,
    }


def timing(report: dict, top: int = 10) -> str:
    """Where the run's time went: the wall time, the seconds summed over the checks, then
    the `top` check files (the suite's check classes) and the `top` checks that took
    longest, as lines of text."""
    checks = report["checks"]
    files: dict[str, list] = {}
    for c in checks:
        entry = files.setdefault(c["id"].partition("::")[0], [0.0, 0])
        entry[0] += c["duration_s"]
        entry[1] += 1
    total = sum(c["duration_s"] for c in checks)
    lines = [f"wall time {report['wall_s']:.1f} s; {total:.1f} s in {len(checks)} checks"]
    lines.append(f"slowest {min(top, len(files))} check files:")
    for name, (seconds, count) in sorted(files.items(), key=lambda f: -f[1][0])[:top]:
        lines.append(f"  {seconds:7.1f} s  {name} ({count} checks)")
    lines.append(f"slowest {min(top, len(checks))} checks:")
    for c in sorted(checks, key=lambda c: -c["duration_s"])[:top]:
        lines.append(f"  {c['duration_s']:7.1f} s  {c['id']}")
    return "\n".join(lines) + "\n"


def markdown(report: dict) -> str:
    r = report
    lines = [
        f"# Conformance report: {r['implementation']} {r['version']}", "",
        f"- adapter: `{r['adapter']}`", f"- platform: {r['platform']}",
        f"- date: {r['date']}; wall time {r['wall_s']} s",
        f"- Hypothesis profile `{r['hypothesis_profile']}`, seed `{r['hypothesis_seed']}`",
        "- clauses: " + ", ".join(f"{k} {v}" for k, v in sorted(r["totals"].items())), "",
        "| clause | level | status | checks | note |", "| --- | --- | --- | --- | --- |",
    ]
    for cid, c in r["clauses"].items():
        note = "; ".join(([f"hardware: {c['hardware']}"] if c.get("hardware") else [])
                         + c["reasons"])[:300].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{cid}` | {c['level']} | {SYMBOL[c['status']]} | {len(c['checks'])} "
                     f"| {note} |")
    return "\n".join(lines) + "\n"


def compare(reports: list[dict]) -> str:
    head = " | ".join(f"{r['implementation']} {r['version']}" for r in reports)
    lines = [f"| clause | level | {head} |", "| --- | --- |" + " --- |" * len(reports)]
    ids = list(dict.fromkeys(cid for r in reports for cid in r["clauses"]))
    for cid in ids:
        level = next(r["clauses"][cid]["level"] for r in reports if cid in r["clauses"])
        cells = " | ".join(SYMBOL[r["clauses"].get(cid, {}).get("status", "untested")]
                           for r in reports)
        lines.append(f"| `{cid}` | {level} | {cells} |")
    walls = ", ".join(f"{r['implementation']} {r['wall_s']} s" for r in reports)
    return "\n".join(lines) + f"\n\nWall time: {walls}\n"


#: every status a cell can show, in the order the counts are listed
STATUSES = ORDER + ["untested"]
_COLOURS = {"pass": "#c8f0c8", "xpass": "#e2f5c0", "fail": "#f6b8b8", "hang": "#e89090",
            "error": "#f3d9a4", "xfail": "#f5ecb0", "skip": "#e4e4e4", "untested": "#ffffff"}
_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:1.5em}"
    "table{border-collapse:collapse;margin-bottom:1.5em}"
    "th,td{border:1px solid #bbb;padding:.25em .6em;text-align:left;vertical-align:top}"
    "th{background:#f0f0f0}td.num{text-align:right}code{font-size:.95em}"
    + "".join(f"td.status-{k}{{background:{v}}}" for k, v in _COLOURS.items())
)


def _counts(report: dict) -> dict[str, int]:
    counts = {s: 0 for s in STATUSES}
    for c in report["clauses"].values():
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    return counts


def html(reports: list[dict], title: str = "Conformance matrix") -> str:
    """The clause x implementation matrix of `reports` as a self-contained HTML page.

    Each status cell has the class `status-<status>` (pass, xpass, fail, hang, error, xfail,
    skip, untested) and carries the clause's reasons as its tooltip; the table above it
    counts the clauses of each status per implementation."""
    from html import escape

    if not reports:
        raise ValueError("html(reports=[]): expected at least one report")
    heads = [f"{r['implementation']} {r['version']}" for r in reports]
    out = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
           f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
           f"<h1>{escape(title)}</h1>", "<table class=\"counts\"><thead><tr><th>status</th>"]
    out += [f"<th>{escape(h)}</th>" for h in heads]
    out.append("</tr></thead><tbody>")
    counts = [_counts(r) for r in reports]
    for status in STATUSES:
        if not any(c.get(status) for c in counts):
            continue
        cells = "".join(f"<td class=\"num status-{status}\">{c.get(status, 0)}</td>"
                        for c in counts)
        out.append(f"<tr><th>{status}</th>{cells}</tr>")
    walls = "".join(f"<td class=\"num\">{escape(str(r.get('wall_s', '?')))} s</td>"
                    for r in reports)
    out += [f"<tr><th>wall time</th>{walls}</tr>", "</tbody></table>",
            "<table class=\"matrix\"><thead><tr><th>clause</th><th>area</th><th>title</th>"
            "<th>level</th>"]
    out += [f"<th>{escape(h)}</th>" for h in heads]
    out.append("</tr></thead><tbody>")
    for cid in dict.fromkeys(cid for r in reports for cid in r["clauses"]):
        known = next(r["clauses"][cid] for r in reports if cid in r["clauses"])
        row = [f"<tr id=\"{escape(cid)}\"><td><code>{escape(cid)}</code></td>",
               f"<td>{escape(cid.partition('.')[0])}</td>",
               f"<td>{escape(known.get('title', '?'))}</td>",
               f"<td>{escape(known.get('level', '?'))}</td>"]
        for r in reports:
            c = r["clauses"].get(cid, {})
            status = c.get("status", "untested")
            note = "; ".join(c.get("reasons", []))[:1000]
            tip = f" title=\"{escape(note)}\"" if note else ""
            row.append(f"<td class=\"status-{escape(status)}\"{tip}>"
                       f"{escape(SYMBOL.get(status, status))}</td>")
        out.append("".join(row) + "</tr>")
    out += ["</tbody></table>", "</body></html>"]
    return "\n".join(out) + "\n"


def write(report: dict, folder: str) -> tuple[str, str, str]:
    """Writes `<impl>.json`, `<impl>.md` and `<impl>.html` into `folder`; returns their paths."""
    import os

    os.makedirs(folder, exist_ok=True)
    base = os.path.join(folder, report["implementation"])
    with open(base + ".json", "w") as f:
        json.dump(report, f, indent=1, default=str)
    with open(base + ".md", "w") as f:
        f.write(markdown(report))
    with open(base + ".html", "w") as f:
        f.write(html([report], title=f"Conformance report: {report['implementation']} "
                                      f"{report['version']}"))
    return base + ".json", base + ".md", base + ".html"
