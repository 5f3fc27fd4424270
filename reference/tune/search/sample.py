"""Search-space domains: what `tune.uniform`, `tune.choice`, ... return.

A domain is a value to be drawn for each trial: `sample(config=None, size=1,
random_state=None)` draws `size` values (one value when size is 1) with a
`numpy.random.Generator` (or a seed). Floats: `uniform`, `quniform`, `loguniform`,
`qloguniform`, `randn`, `qrandn`; integers: `randint` and `lograndint` (upper bound
excluded, as in Ray), `qrandint` and `qlograndint` (upper bound included); `choice`;
`sample_from(fn)`, called with the trial's config (the values resolved so far). A
`grid_search(values)` is not a domain but the marker `{"grid_search": values}`: the
variant generator expands it into one trial per value.
"""

from __future__ import annotations

import abc
import math
from typing import Any, Callable, Sequence

import numpy as np


def _rng(random_state) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.default_rng(random_state)


def _number(fn: str, arg: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"tune.{fn}({arg}={value!r}): expected a finite number.")
    return value


def _quantize(value: float, q: float | None) -> float:
    return value if q is None else np.round(value / q) * q


class Domain(abc.ABC):
    """A value drawn for each trial (subclasses: Float, Integer, Categorical, Function)."""

    @abc.abstractmethod
    def _draw(self, rng: np.random.Generator, config: dict | None): ...

    def sample(self, config: dict | None = None, size: int = 1, random_state=None):
        rng = _rng(random_state)
        values = [self._draw(rng, config) for _ in range(size)]
        return values[0] if size == 1 else values

    @abc.abstractmethod
    def is_valid(self, value: Any) -> bool: ...


class Float(Domain):
    def __init__(self, lower: float, upper: float, *, log: bool = False, base: float = 10,
                 q: float | None = None, normal: tuple | None = None):
        self.lower, self.upper, self.log, self.base, self.q = lower, upper, log, base, q
        self.normal = normal  # (mean, sd) for randn

    def _draw(self, rng, config):
        if self.normal is not None:
            return float(_quantize(rng.normal(*self.normal), self.q))
        if self.log:
            lo, hi = math.log(self.lower, self.base), math.log(self.upper, self.base)
            value = self.base ** rng.uniform(lo, hi)
        else:
            value = rng.uniform(self.lower, self.upper)
        value = float(_quantize(value, self.q))
        return min(max(value, self.lower), self.upper) if self.q is not None else value

    def is_valid(self, value) -> bool:
        return self.normal is not None or self.lower <= value <= self.upper

    def __repr__(self) -> str:
        return f"Float(lower={self.lower}, upper={self.upper}, log={self.log}, q={self.q})"


def _grid_index(bound: float, q: float, round_fn) -> int:
    """`bound`'s index on the grid of multiples of q, rounded inwards (`round_fn`)."""
    scaled = bound / q
    nearest = round(scaled)
    return int(nearest if math.isclose(scaled, nearest) else round_fn(scaled))


class Integer(Domain):
    def __init__(self, lower: int, upper: int, *, log: bool = False, base: float = 10,
                 q: int | None = None):
        self.lower, self.upper, self.log, self.base, self.q = lower, upper, log, base, q

    def _draw(self, rng, config):
        lo, hi = self.lower, self.upper
        if self.q is not None:
            # As Ray: draw an index over the multiples of q inside the bounds (the upper one
            # included unless q == 1), then scale it back.
            lo, hi = _grid_index(lo, self.q, math.ceil), _grid_index(hi, self.q, math.floor)
            if hi < lo:
                raise ValueError(f"There is no multiple of the quantization factor q={self.q} "
                                 f"between the bounds {self.lower} and {self.upper} of this "
                                 "domain, so it has no values to sample.")
            hi += 0 if self.q == 1 else 1
        if self.log:
            index = int(np.floor(np.exp(rng.uniform(np.log(lo), np.log(hi)))))
        else:
            index = int(rng.integers(lo, hi))
        return int(index * self.q) if self.q is not None else index

    def is_valid(self, value) -> bool:
        top = self.upper if self.q is not None else self.upper - 1
        return self.lower <= value <= top

    def __repr__(self) -> str:
        return f"Integer(lower={self.lower}, upper={self.upper}, log={self.log}, q={self.q})"


class Categorical(Domain):
    def __init__(self, categories: Sequence):
        self.categories = list(categories)

    def _draw(self, rng, config):
        return self.categories[int(rng.integers(len(self.categories)))]

    def is_valid(self, value) -> bool:
        return value in self.categories

    def __len__(self) -> int:
        return len(self.categories)

    def __getitem__(self, item):
        return self.categories[item]

    def __repr__(self) -> str:
        return f"Categorical({self.categories!r})"


class Function(Domain):
    """`sample_from(fn)`: fn(config) with the trial's config resolved so far (or fn())."""

    def __init__(self, func: Callable):
        self.func = func

    def _draw(self, rng, config):
        try:
            import inspect

            takes = len(inspect.signature(self.func).parameters) > 0
        except (TypeError, ValueError):
            takes = True
        if not takes:
            return self.func()
        config = config if config is not None else {}
        try:
            return self.func(config)
        except (AttributeError, KeyError):
            # Ray's older form, fn(spec) reading spec.config.<name>: still accepted there
            return self.func(_Spec({"config": config}))

    def is_valid(self, value) -> bool:
        return True

    def __repr__(self) -> str:
        return f"Function({getattr(self.func, '__name__', self.func)})"


class _Spec(dict):
    """A dict whose keys read as attributes, nested (`spec.config.lr`)."""

    def __getattr__(self, name):
        try:
            value = self[name]
        except KeyError:
            raise AttributeError(name) from None
        return _Spec(value) if isinstance(value, dict) else value


# ------------------------------------------------------------------------------- the API
def _ordered(fn: str, lower, upper) -> None:
    if not lower < upper:
        raise ValueError(f"tune.{fn}(lower={lower!r}, upper={upper!r}): lower must be "
                         "below upper.")


def _positive(fn: str, arg: str, value) -> None:
    if _number(fn, arg, value) <= 0:
        raise ValueError(f"tune.{fn}({arg}={value!r}): must be > 0.")


def uniform(lower: float, upper: float) -> Float:
    _ordered("uniform", _number("uniform", "lower", lower), _number("uniform", "upper", upper))
    return Float(lower, upper)


def quniform(lower: float, upper: float, q: float) -> Float:
    _ordered("quniform", _number("quniform", "lower", lower),
             _number("quniform", "upper", upper))
    _positive("quniform", "q", q)
    return Float(lower, upper, q=q)


def loguniform(lower: float, upper: float, base: float = 10) -> Float:
    _positive("loguniform", "lower", lower)
    _ordered("loguniform", lower, _number("loguniform", "upper", upper))
    return Float(lower, upper, log=True, base=base)


def qloguniform(lower: float, upper: float, q: float, base: float = 10) -> Float:
    _positive("qloguniform", "lower", lower)
    _ordered("qloguniform", lower, _number("qloguniform", "upper", upper))
    _positive("qloguniform", "q", q)
    return Float(lower, upper, log=True, base=base, q=q)


def randn(mean: float = 0.0, sd: float = 1.0) -> Float:
    _positive("randn", "sd", sd)
    return Float(-math.inf, math.inf, normal=(_number("randn", "mean", mean), sd))


def qrandn(mean: float, sd: float, q: float) -> Float:
    _positive("qrandn", "sd", sd)
    _positive("qrandn", "q", q)
    return Float(-math.inf, math.inf, normal=(_number("qrandn", "mean", mean), sd), q=q)


def _ints(fn: str, lower, upper) -> None:
    for arg, value in (("lower", lower), ("upper", upper)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"tune.{fn}({arg}={value!r}): expected an int.")
    _ordered(fn, lower, upper)


def randint(lower: int, upper: int) -> Integer:
    """An int in [lower, upper) (upper excluded)."""
    _ints("randint", lower, upper)
    return Integer(lower, upper)


def lograndint(lower: int, upper: int, base: float = 10) -> Integer:
    _ints("lograndint", lower, upper)
    _positive("lograndint", "lower", lower)
    return Integer(lower, upper, log=True, base=base)


def qrandint(lower: int, upper: int, q: int = 1) -> Integer:
    """A multiple of q in [lower, upper] (upper included)."""
    _ints("qrandint", lower, upper)
    _positive("qrandint", "q", q)
    return Integer(lower, upper, q=q)


def qlograndint(lower: int, upper: int, q: int, base: float = 10) -> Integer:
    _ints("qlograndint", lower, upper)
    _positive("qlograndint", "lower", lower)
    _positive("qlograndint", "q", q)
    return Integer(lower, upper, log=True, base=base, q=q)


def choice(categories: Sequence) -> Categorical:
    if isinstance(categories, (str, bytes)) or not isinstance(categories, Sequence) \
            or not categories:
        raise ValueError(f"tune.choice(categories={categories!r}): expected a non-empty list.")
    return Categorical(categories)


def sample_from(func: Callable) -> Function:
    if not callable(func):
        raise ValueError(f"tune.sample_from(func={func!r}): expected a callable.")
    return Function(func)


def grid_search(values: Sequence) -> dict:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"tune.grid_search(values={values!r}): expected a list.")
    return {"grid_search": list(values)}
