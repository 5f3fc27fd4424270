"""The record a clause is, and the Ray source paths the clauses cite as their sources."""

import dataclasses
from typing import Literal

Level = Literal["MUST", "SHOULD"]


@dataclasses.dataclass(frozen=True)
class Clause:
    id: str
    level: Level
    title: str
    text: str
    source: str
    example: str = ""
    why: str = ""
    ray_note: str = ""

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]


C = Clause

CFG = "python/ray/train/v2/api/config.py"
AIR = "python/ray/air/config.py"
CKPT = "python/ray/train/_checkpoint.py"
RESULT = "python/ray/train/v2/api/result.py"
FN = "python/ray/train/v2/api/train_fn_utils.py"
CTRL = "python/ray/train/v2/_internal/execution/controller/controller.py"
CKMGR = "python/ray/train/v2/_internal/execution/checkpoint/checkpoint_manager.py"
FAIL = "python/ray/train/v2/_internal/execution/failure_handling/default.py"
LOCAL = "python/ray/train/v2/_internal/execution/local_mode/"
WG = "python/ray/train/v2/_internal/execution/worker_group/worker_group.py"
ELASTIC = "python/ray/train/v2/_internal/execution/scaling_policy/elastic.py"
CKMGR_SCORE = "python/ray/train/_internal/checkpoint_manager.py:_get_checkpoint_score"
STORAGE = "python/ray/train/v2/_internal/execution/storage.py"
DOC_FT = "https://docs.ray.io/en/latest/train/user-guides/fault-tolerance.html"
TORCH_CFG = "python/ray/train/torch/config.py"
TORCH_UTILS = "python/ray/train/v2/torch/train_loop_utils.py"
WORKER_CTX = "python/ray/train/v2/_internal/execution/context.py"
JAX = "python/ray/train/v2/jax/"
TUNE = "python/ray/tune/"
BACKEND = ("python/ray/train/backend.py; python/ray/train/v2/_internal/callbacks/backend_setup.py; "
           "python/ray/train/v2/_internal/execution/worker_group/execution_group.py")
