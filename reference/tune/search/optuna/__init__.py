"""`OptunaSearch`, importable without optuna installed (constructing it then raises Ray's
AssertionError saying how to install it)."""

from reference.tune.search.optuna.optuna_search import OptunaSearch

__all__ = ["OptunaSearch"]
