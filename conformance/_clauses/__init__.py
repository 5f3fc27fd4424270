"""The clauses of the Ray Train contract, as Ray 2.60 behaves (see `catalogue.py`), one
module per part of the contract, in the order the catalogue lists them; `Clause` is the
record each is (`_record`, with the Ray source paths the clauses cite)."""

from conformance._clauses import (
    configs_and_reports,
    execution,
    hf_and_xgboost,
    lightgbm_and_jax,
    runs,
    tensorflow_and_data,
    tune_and_surface,
)
from conformance._clauses._record import Clause

ALL = [clause for part in (configs_and_reports, runs, execution, hf_and_xgboost, lightgbm_and_jax, tensorflow_and_data, tune_and_surface)
       for clause in part.CLAUSES]

__all__ = ["ALL", "Clause"]
