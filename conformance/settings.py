"""Hypothesis profiles and example counts.

`fast` (the default, for CI) and `thorough`. Pure-API properties run `api_examples()`
examples; properties whose every example runs fit() run `fit_examples(impl)`, which the
adapter sizes (a Ray fit takes seconds, a reference fit a fraction of one).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

_COMMON = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("fast", max_examples=200, **_COMMON)
settings.register_profile("thorough", max_examples=2000, **_COMMON)
_FIT_FACTOR = {"fast": 1, "thorough": 4}


def profile_name() -> str:
    return getattr(settings, "_current_profile", None) or "default"


def api_examples() -> int:
    return settings().max_examples


def fit_examples(impl) -> int:
    return impl.fit_examples * _FIT_FACTOR.get(profile_name(), 1)


def fit_settings(impl, **overrides) -> settings:
    return settings(max_examples=fit_examples(impl), database=None, **_COMMON, **overrides)
