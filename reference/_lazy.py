"""A module imported on first attribute access.

pandas and `pyarrow.dataset` are needed to build a frame or read files, never by a training
worker; imported eagerly by `reference.train` they cost every worker a fifth of a second and
made each fork of a preloaded node slower (more mappings to copy). A module-level
`pd = LazyModule("pandas")` keeps `pd.DataFrame(...)` in code and in annotations, which
`typing.get_type_hints` still resolves.
"""

from __future__ import annotations

import importlib


class LazyModule:
    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"LazyModule({self._name!r})"
