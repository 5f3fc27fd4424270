"""Conformance reports: per-check and per-clause statuses as JSON and Markdown.

Statuses: pass, fail, xfail (failed as the expectations file says), xpass (passed although
expected to fail), skip, hang (did not finish before its deadline), error (the suite's own
instruments failed, so the run was not judged; not counted against the implementation). A
clause takes the worst status of its checks: hang > fail > error > xfail > skip > xpass > pass.

Each entry of `checks` holds: `id` (relative to conformance/checks/), `status`, `clauses`
(the ids the check names), `reason` (one line for the tables), `error` and `message` (the
type name and text of what the check raised, cut at 2000 characters; null when it raised
nothing), `phase` (pytest's "setup" when the failure came before the check body, e.g. from
the adapter, else "call") and `duration_s`.
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
        note = "; ".join(c["reasons"])[:300].replace("|", "\\|").replace("\n", " ")
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


def write(report: dict, folder: str) -> tuple[str, str]:
    import os

    os.makedirs(folder, exist_ok=True)
    base = os.path.join(folder, report["implementation"])
    with open(base + ".json", "w") as f:
        json.dump(report, f, indent=1, default=str)
    with open(base + ".md", "w") as f:
        f.write(markdown(report))
    return base + ".json", base + ".md"
