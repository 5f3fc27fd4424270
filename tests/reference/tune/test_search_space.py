"""reference.tune's search spaces and variant generation, against Ray 2.60's where Ray is
installed: the same variants in the same order, values inside their domains."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import reference.tune as tune
from reference.tune.search.variant_generator import count_variants, generate_variants

SPACES = [
    {"a": tune.grid_search([1, 2]), "b": {"c": tune.grid_search(["x", "y"]), "d": tune.uniform(0, 1)}},
    {"lr": tune.loguniform(1e-4, 1e-1), "layers": tune.grid_search([[1, 2], [3]]),
     "opt": {"name": tune.grid_search(["sgd", "adam"]), "momentum": tune.grid_search([0, 9])}},
    {"x": 3, "nested": [tune.grid_search([1, 2, 3]), {"deep": tune.choice(["p", "q"])}]},
]


def _ray_space(space):
    """The same space built with ray.tune's constructors."""
    import ray.tune as rt

    def convert(value):
        if isinstance(value, dict):
            if set(value) == {"grid_search"}:
                return rt.grid_search(value["grid_search"])
            return {k: convert(v) for k, v in value.items()}
        if isinstance(value, list):
            return [convert(v) for v in value]
        if isinstance(value, tune.search.sample.Categorical):
            return rt.choice(value.categories)
        if isinstance(value, tune.search.sample.Float):
            return rt.loguniform(value.lower, value.upper) if value.log else \
                rt.uniform(value.lower, value.upper)
        return value

    return convert(space)


@pytest.mark.parametrize("space", SPACES)
def test_grid_variants_come_in_rays_order(space):
    pytest.importorskip("ray.tune")
    from ray.tune.search.variant_generator import generate_variants as ray_variants

    ours = list(generate_variants(space, random_state=0))
    theirs = list(ray_variants(_ray_space(space)))
    assert len(ours) == len(theirs) == count_variants(space)

    grids = sorted(path for path, value in theirs[0][0].items()
                   if not isinstance(value, float) and path[-1] != "deep")
    assert [sorted(r) for r, _ in ours] == [sorted(r) for r, _ in theirs]  # same leaves
    assert [[r[p] for p in grids] for r, _ in ours] == [[r[p] for p in grids] for r, _ in theirs]


def test_sample_from_sees_the_resolved_config_in_both_forms():
    space = {"a": tune.grid_search([1, 2]), "b": tune.sample_from(lambda config: config["a"] * 10),
             "c": tune.sample_from(lambda spec: spec.config.a + 1), "d": tune.sample_from(lambda: 7)}
    assert [c for _, c in generate_variants(space)] == [
        {"a": 1, "b": 10, "c": 2, "d": 7}, {"a": 2, "b": 20, "c": 3, "d": 7}]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_drawn_values_stay_in_their_domains(seed):
    space = {"u": tune.uniform(-1, 1), "q": tune.quniform(0, 1, 0.25),
             "l": tune.loguniform(1e-3, 1), "i": tune.randint(0, 3), "qi": tune.qrandint(0, 10, 5),
             "li": tune.lograndint(1, 100), "c": tune.choice(["a", "b", "c"])}
    _, config = next(generate_variants(space, random_state=seed))
    assert -1 <= config["u"] <= 1 and config["q"] in (0, 0.25, 0.5, 0.75, 1.0)
    assert 1e-3 <= config["l"] <= 1 and config["i"] in (0, 1, 2) and config["qi"] in (0, 5, 10)
    assert 1 <= config["li"] < 100 and config["c"] in ("a", "b", "c")


def test_constant_grid_search_draws_once_for_every_combination():
    space = {"g": tune.grid_search([1, 2, 3]), "u": tune.uniform(0, 1)}
    fresh = {c["u"] for _, c in generate_variants(space, random_state=1)}
    constant = {c["u"] for _, c in generate_variants(space, constant_grid_search=True,
                                                     random_state=1)}
    assert len(fresh) == 3 and len(constant) == 1


@pytest.mark.parametrize("call, message", [
    (lambda: tune.uniform(1, 0), "lower must be below upper"),
    (lambda: tune.loguniform(0, 1), "lower=0\\): must be > 0"),
    (lambda: tune.randint(0, 2.5), "upper=2.5\\): expected an int"),
    (lambda: tune.choice([]), "expected a non-empty list"),
    (lambda: tune.grid_search("ab"), "expected a list"),
    (lambda: tune.sample_from(3), "expected a callable"),
])
def test_bad_spaces_name_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_names_are_rays():
    ray_tune = pytest.importorskip("ray.tune")
    for name in tune.__all__:
        assert hasattr(ray_tune, name), name
    assert tune.grid_search([1]) == ray_tune.grid_search([1])
