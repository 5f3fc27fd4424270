"""The pytest layer of the suite (registered through the `pytest11` entry point).

Thin on purpose: it picks the adapter (`--impl` or TRAINSPEC_IMPL), hands it to checks as
the `impl` fixture, applies the implementation's expectation file, turns a `HangVerdict`
into the status `hang`, prints the header and a per-clause summary, and writes the report
(`--conformance-report DIR`: JSON, Markdown and HTML), and orders the checks
(`run_order`). It stays inert for test runs that collect no checks; a run of the
reference's checks keeps its temporary files in memory where there is room
(`conformance.scratch`; not for Ray's session folder, nor for Docker nodes' mounts).

A bad `--impl` is refused at configure time with one usage error (`adapters.resolve`),
before anything is collected. `--conformance-progress` (which `python -m conformance run`
passes) shows checks done / total on stderr through `conformance.progress`, and then blanks
pytest's own per-test letters so the two displays do not interleave.
"""

from __future__ import annotations

import builtins
import os
import random
import sys
import time

import pytest

from conformance import expectations, scratch, settings  # noqa: F401 - settings: profiles
from conformance.fixtures import impl, impl_name, is_check, session_for_check  # noqa: F401
from conformance.s3_server import s3, s3_endpoint  # noqa: F401 - fixtures for s3:// storage

_STATE: dict = {}


def pytest_addoption(parser):
    group = parser.getgroup("trainspec conformance")
    group.addoption("--impl", default=None,
                    help="implementation under test: 'reference', 'ray' or 'module:factory' "
                         "(default: $TRAINSPEC_IMPL or 'reference')")
    group.addoption("--sim-provider", default=None, choices=["process", "netns", "docker"],
                    help="--impl reference: where simcluster runs the multi-node checks' "
                         "nodes: processes, network namespaces or Docker containers "
                         "(default: $TRAINSPEC_SIM_PROVIDER or 'process')")
    group.addoption("--ray-address", default=None, metavar="ADDR",
                    help="--impl ray: run against this running Ray cluster (HOST:PORT or "
                         "ray://HOST:10001) instead of a local session; it is never shut "
                         "down (default: $TRAINSPEC_RAY_ADDRESS, else a local session)")
    group.addoption("--allow-node-faults", action="store_true", default=False,
                    help="with --ray-address: run the checks that add, remove and kill nodes "
                         "on nodes the suite adds to that cluster itself (`ray start "
                         "--address` on this machine), never on the cluster's own "
                         "(default: off, they skip; also $TRAINSPEC_ALLOW_NODE_FAULTS=1)")
    group.addoption("--conformance-report", default=None, metavar="DIR",
                    help="write <impl>.json and <impl>.md conformance reports into DIR")
    group.addoption("--expectations", default=None, metavar="FILE",
                    help="expectation file (default: conformance/expectations/<impl>.txt)")
    group.addoption("--conformance-progress", action="store_true", default=False,
                    help="show checks done / total, the running check and the time elapsed "
                         "on stderr (default: off)")
    group.addoption("--conformance-progress-style", default="auto",
                    choices=["auto", "live", "plain"],
                    help="with --conformance-progress: 'live' (a rich display), 'plain' (one "
                         "line per check) or 'auto' (live on a terminal) (default: auto)")


def _expectations_path(config) -> str:
    return config.getoption("--expectations") or expectations.path_for(impl_name(config))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # Fix one Hypothesis seed for the whole run so the header can print it.
    if config.getoption("hypothesis_seed", None) is None and not hasattr(config, "workerinput"):
        config.option.hypothesis_seed = random.getrandbits(32)
    from hypothesis import settings as hypothesis_settings

    if config.getoption("hypothesis_profile", None) is None:
        hypothesis_settings.load_profile("fast")
    _STATE.update(start=time.monotonic(), checks=[], progress=None)
    address, provider = config.getoption("--ray-address"), config.getoption("--sim-provider")
    if _checks_requested(config) and impl_name(config) == "reference":
        from conformance.adapters.reference_adapter import sim_provider  # light: stdlib only

        if sim_provider(provider) != "docker":
            scratch.use_memory_scratch()  # before anything makes a temporary file
    node_faults = config.getoption("--allow-node-faults")
    if (address or provider or node_faults) and _checks_requested(config):
        from conformance import adapters
        from conformance.adapters.ray_adapter import ALLOW_NODE_FAULTS_ENV, RAY_ADDRESS_ENV
        from conformance.adapters.reference_adapter import SIM_PROVIDER_ENV

        try:
            adapters.check_cluster_options(impl_name(config), provider, address, node_faults)
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        for name, value in ((RAY_ADDRESS_ENV, address), (SIM_PROVIDER_ENV, provider),
                            (ALLOW_NODE_FAULTS_ENV, "1" if node_faults else None)):
            if value:
                os.environ[name] = value
    # after the options: a misused option is named even where the implementation is missing
    if _checks_requested(config) and not hasattr(config, "workerinput"):
        from conformance import adapters

        try:
            adapters.resolve(impl_name(config))
        except adapters.LOAD_ERRORS as exc:
            raise pytest.UsageError(str(exc)) from None


def _checks_requested(config) -> bool:
    return any("conformance" in str(a) for a in config.args) or bool(config.getoption("--impl"))


def pytest_report_header(config):
    if not _checks_requested(config):
        return None
    name = impl_name(config)
    from conformance import adapters

    try:
        adapter = adapters.load(name)
        version, described = _safe(adapter.version), adapter.describe()
    except Exception as exc:  # noqa: BLE001 - the header must not break the run
        version, described = f"unavailable ({type(exc).__name__}: {exc})", name
    profile = config.getoption("hypothesis_profile", None) or "fast"
    return [
        f"trainspec conformance: implementation={name} version={version}",
        f"  adapter={described} hypothesis_seed={config.getoption('hypothesis_seed')} "
        f"hypothesis_profile={profile}",
        f"  expectations={_expectations_path(config)}",
    ]


def _safe(fn):
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        return f"unavailable ({type(exc).__name__}: {exc})"


def pytest_collection_modifyitems(config, items):
    checks = [i for i in items if is_check(i)]
    if not checks:
        return
    items[:] = run_order(items)
    entries = expectations.load(_expectations_path(config))
    for item in checks:
        entry = expectations.match(entries, item.nodeid)
        if entry is not None:
            item.add_marker(pytest.mark.xfail(reason=entry.reason, strict=False))


def run_order(items: list) -> list:
    """`items` in the order the checks run (other tests first, as they were): first the
    checks marked `cluster`, in their order,
    then the others file by file, the files with the most checks first (each file's checks
    in their order). A cluster check replaces the implementation's session (its default
    cluster, a Ray session) with a cluster of its own, and the session starts again at the
    next check that needs it: run together first, the cluster checks leave the session to
    every later check, which starts it once, and they run while the driver has imported few
    frameworks (a default cluster, or a Tune run, asks its nodes for every framework the
    driver imported). Split over pytest-xdist processes file by file, in this order
    (`--dist loadfile --no-loadscope-reorder`), the big files go first and the small ones
    even out the end."""
    marked = [i for i in items if is_check(i) and i.get_closest_marker("cluster")]
    moved = set(map(id, marked))
    rest = [i for i in items if id(i) not in moved]
    files: dict = {}
    for item in rest:
        files.setdefault(str(item.path) if is_check(item) else None, []).append(item)
    checks = sorted((f for f in files if f is not None), key=lambda f: -len(files[f]))
    return files.get(None, []) + marked + [i for f in checks for i in files[f]]


def _progress_wanted(config) -> bool:
    return bool(config.getoption("--conformance-progress")) and not hasattr(config, "workerinput")


def _open_progress(config, total: int) -> None:
    if _STATE.get("progress") is not None or not _progress_wanted(config):
        return
    from conformance.progress import Progress

    style = config.getoption("--conformance-progress-style")
    live = {"auto": None, "live": True, "plain": False}[style]
    stream = _own_stderr()
    _STATE["progress_stream"] = stream
    _STATE["progress"] = Progress(total, f"conformance: {impl_name(config)}", live=live,
                                  stream=stream or sys.stderr)


def _own_stderr():
    """A stream on a copy of the stderr descriptor, taken while pytest's capture is suspended:
    the live display redraws from its own thread, also while a check runs, and pytest then
    points descriptor 2 at its capture file (the redraws would land in the check's captured
    stderr). None where stderr has no descriptor (an in-process run): use sys.stderr."""
    try:
        return os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1)
    except (AttributeError, OSError, ValueError):
        return None


def pytest_collection_finish(session):
    if not hasattr(session.config, "workerinput"):
        _open_progress(session.config, sum(1 for i in session.items if is_check(i)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    # under xdist the controller collects nothing itself: the first worker's list counts
    if _STATE.get("progress") is None:
        _open_progress(node.config, sum(1 for i in ids if _is_check_id(i)))


def _is_check_id(nodeid: str) -> bool:
    return os.path.basename(nodeid.partition("::")[0]).startswith("check_")


def pytest_runtest_logstart(nodeid, location):
    progress = _STATE.get("progress")
    if progress is not None and _is_check_id(nodeid):
        progress.start(expectations.check_id(nodeid))


@pytest.hookimpl(wrapper=True)
def pytest_report_teststatus(report, config):
    result = yield
    if _STATE.get("progress") is not None and result:
        category, _letter, word = result
        return category, "", word
    return result


#: how a status reads on a progress line
_PROGRESS_WORD = {"pass": "passed", "fail": "FAILED", "xfail": "xfailed", "xpass": "XPASSED",
                  "skip": "skipped", "hang": "HANG", "error": "suite error"}


def pytest_sessionfinish(session):
    progress = _STATE.pop("progress", None)
    if progress is not None:
        progress.close()
    stream = _STATE.pop("progress_stream", None)
    if stream is not None:
        stream.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not is_check(item):
        return
    from conformance.adapters.base import Unsupported
    from conformance.assertions import HangVerdict

    if call.excinfo is not None and call.excinfo.errisinstance(Unsupported):
        report.outcome, report.longrepr = "skipped", (str(item.path), 0,
                                                      f"Skipped: {call.excinfo.value}")
    from conformance.probe import ProbeError

    hang = call.excinfo is not None and call.excinfo.errisinstance(HangVerdict)
    # the suite's own instruments failed: neither a pass nor the implementation's failure
    # (pytest turns a unittest.SkipTest into its own skip before this hook sees it)
    suite_error = call.excinfo is not None and (
        call.excinfo.errisinstance(ProbeError)
        or str(call.excinfo.value).startswith(ProbeError.PREFIX))
    clauses = [c for m in item.iter_markers("clause") for c in m.args]
    error = message = None
    if call.excinfo is not None and (report.failed or hasattr(report, "wasxfail")):
        error, message = _describe(call.excinfo.value)
    # a check that records ("hardware", "real" | "simulated") says where its devices were
    hardware = dict(item.user_properties).get("hardware")
    report.user_properties.append(("conformance", {"clauses": clauses, "hang": hang,
                                                   "suite_error": suite_error,
                                                   "error": error, "message": message,
                                                   "hardware": hardware}))


#: how much of a failure's message a report keeps
MESSAGE_CHARS = 2000
# a builtin from Python 3.11 (on 3.10 a group is described by its str alone)
_EXCEPTION_GROUP = getattr(builtins, "BaseExceptionGroup", ())


def _describe(exc: BaseException) -> tuple[str, str]:
    """(type name, message) of what a check raised; an exception group (Hypothesis found
    several distinct failures) lists its members, one "Type: message" line each."""
    text = str(exc)
    if isinstance(exc, _EXCEPTION_GROUP):
        text += "".join(f"\n{type(e).__name__}: {e}" for e in exc.exceptions)
    return type(exc).__name__, text[:MESSAGE_CHARS]


def _status(report) -> str | None:
    info = dict(report.user_properties).get("conformance")
    if info is None:
        return None
    if info["hang"]:
        return "hang"
    if info.get("suite_error"):
        return "error"
    if hasattr(report, "wasxfail"):
        return "xfail" if report.skipped else "xpass"
    if report.skipped:
        return "skip"
    return "pass" if report.passed else "fail"


def pytest_runtest_logreport(report):
    info = dict(report.user_properties).get("conformance")
    if info is None:
        return
    status = _status(report)
    interesting = report.when == "call" or (report.when == "setup" and not report.passed)
    if not interesting:
        return
    progress = _STATE.get("progress")
    if progress is not None:
        progress.done(expectations.check_id(report.nodeid), _PROGRESS_WORD.get(status, status))
    reason = ""
    if status in ("skip", "xfail", "error") and isinstance(report.longrepr, tuple):
        reason = report.longrepr[2]
    elif hasattr(report, "wasxfail"):
        reason = report.wasxfail
    elif status in ("fail", "hang") and info.get("error"):
        head = info["message"].partition("\n")[0]
        reason = f"{info['error']}: {head}"[:300]
    elif status in ("fail", "hang"):
        reason = (report.longreprtext or "").strip().splitlines()[-1:] or [""]
        reason = reason[0][:300]
    _STATE["checks"].append({
        "id": expectations.check_id(report.nodeid), "status": status,
        "clauses": info["clauses"], "reason": reason, "error": info.get("error"),
        "message": info.get("message"), "phase": report.when,
        "duration_s": round(report.duration, 2),
        **({"hardware": info["hardware"]} if info.get("hardware") else {}),
    })


def _build_report(config) -> dict:
    from conformance import adapters, report

    name = impl_name(config)
    try:
        adapter = adapters.load(name)
        name, version, described = adapter.name, _safe(adapter.version), adapter.describe()
    except Exception as exc:  # noqa: BLE001
        version, described = f"unavailable ({exc})", name
    return report.build(
        name, version, described, config.getoption("hypothesis_seed"),
        config.getoption("hypothesis_profile", None) or "fast", _STATE["checks"],
        time.monotonic() - _STATE["start"],
    )


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _STATE.get("checks") or hasattr(config, "workerinput"):
        return
    from conformance import report as report_mod

    rep = _build_report(config)
    tr = terminalreporter
    tr.section("trainspec conformance report")
    tr.write(report_mod.markdown(rep))
    tr.section("trainspec conformance time")
    tr.write(report_mod.timing(rep))
    entries = expectations.load(_expectations_path(config))
    for check in _STATE["checks"]:
        entry = expectations.match(entries, check["id"])
        if entry is not None:
            entry.matched += 1
            entry.xfailed += check["status"] in ("xfail", "hang")
            entry.xpassed += check["status"] == "xpass"
    for line in expectations.stale(entries):
        tr.write_line(f"WARNING stale expectation ({impl_name(config)}): {line}", yellow=True)
    folder = config.getoption("--conformance-report")
    if folder:
        paths = report_mod.write(rep, folder)
        tr.write_line("report written: " + " ".join(paths))
