"""trainspec's conformance suite for the Ray Train API.

Run it with `pytest conformance/ --impl reference|ray|module:factory`, or
`python -m conformance run --impl NAME` for the suite plus its report. Checks are plain
functions taking an adapter (`conformance.adapters.Adapter`); they name the clauses of the
catalogue (`conformance.catalogue.CLAUSES`) they cover.
"""

from conformance.catalogue import CLAUSES, Clause, clause

__version__ = "0.1.0"
__all__ = ["CLAUSES", "Clause", "clause", "__version__"]
