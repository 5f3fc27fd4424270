"""The fault-injection matrix: fault kind x job x implementation, one verdict per cell.

`python -m conformance matrix --help` runs it (`cli`); `faults` holds the fault kinds,
`cells` the built-in jobs and how one cell runs, `job_file` the contract of a user's job
file (`--job path.py`), `table` the verdicts and the printed table, `torch_job` the
`torch-ddp` job. The command itself is not imported here, so `python -m
conformance.matrix.cli` runs it without a second copy of the module.
"""

from conformance.matrix.cells import JOBS, Job, job_of_file, run_cell
from conformance.matrix.faults import FAULTS, FaultKind
from conformance.matrix.job_file import JobFile, JobFileError, load_job
from conformance.matrix.table import VERDICTS, CellResult, exit_code, render, to_json

__all__ = [
    "FAULTS",
    "JOBS",
    "VERDICTS",
    "CellResult",
    "FaultKind",
    "Job",
    "JobFile",
    "JobFileError",
    "exit_code",
    "job_of_file",
    "load_job",
    "render",
    "run_cell",
    "to_json",
]
