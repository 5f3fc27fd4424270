"""What a fit() shows on the console: `reference.train`'s log records at the run's
`LoggingConfig(log_level=...)`, and one line instead of tracebacks when it is interrupted.

Logging follows Ray Train's: during a run the `reference.train` loggers pass records at the
configured level and above. When the application has not configured logging (the root
logger has no handler), they are printed on stderr prefixed "(TrainController)", as Ray's
console handler prints the controller actor's records; when it has, they go to its
handlers and nothing is added. Both are undone when the fit ends.

Ctrl-C during fit(): the controller shuts the worker group down (every worker process
gone), then one line says what was stopped and where the run's state is, and the
KeyboardInterrupt goes on up. If nothing catches it, the interpreter ends as it does for
any Ctrl-C (exit status 130), without printing a traceback for it.
"""

from __future__ import annotations

import contextlib
import logging
import sys

LOGGER = "reference.train"


class _Prefix(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"(TrainController) {super().format(record)}"


@contextlib.contextmanager
def run_logging(logging_config):
    """Apply a run's LoggingConfig to the `reference.train` loggers while the run lasts."""
    level = getattr(logging, getattr(logging_config, "log_level", None) or "INFO")
    logger = logging.getLogger(LOGGER)
    old_level = logger.level
    handler = None
    if not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_Prefix("%(message)s"))
        handler.setLevel(level)
        logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(old_level)
        if handler is not None:
            logger.removeHandler(handler)


def report_interrupt(exc: KeyboardInterrupt, what: str) -> None:
    """Print the one line for an interrupted run and keep the interpreter from printing a
    traceback for `exc` if it is never caught."""
    print(f"reference.train: interrupted (Ctrl-C): {what}", file=sys.stderr, flush=True)
    exc._trainspec_reported = True
    if not getattr(sys.excepthook, "_trainspec", False):
        previous = sys.excepthook

        def hook(kind, value, tb):
            if isinstance(value, KeyboardInterrupt) and getattr(value, "_trainspec_reported",
                                                                 False):
                return
            previous(kind, value, tb)

        hook._trainspec = True
        sys.excepthook = hook
