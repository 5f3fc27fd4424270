"""Jepsen-style checkers over a cluster history: each returns a `Verdict`.

    from simcluster import History, checkers
    verdicts = checkers.check_all(History.read(path))
"""

from ._checkers import (
    CHECKERS,
    Verdict,
    check_all,
    every_worker_exits,
    never_oversubscribed,
    no_worker_on_down_node,
)

__all__ = [
    "CHECKERS",
    "Verdict",
    "check_all",
    "every_worker_exits",
    "never_oversubscribed",
    "no_worker_on_down_node",
]
