"""`python -m conformance SUBCOMMAND --help`: every subcommand has a description, and every
option is listed with its default."""

import importlib.util
import re

import pytest
from conformance_cli_run import run

from conformance.__main__ import build_parser

SUBCOMMANDS = ["run", "report", "compare", "spec"]


def _subparser(name):
    parser = build_parser()
    choices = next(a for a in parser._actions if hasattr(a, "choices") and a.choices
                   and name in a.choices)
    return choices.choices[name]


def test_top_level_help_lists_every_subcommand():
    result = run("--help")
    assert result.returncode == 0, result.stderr
    for name in [*SUBCOMMANDS, "matrix"]:
        assert re.search(rf"^\s+{name}\s+\S", result.stdout, re.M), (name, result.stdout)


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_subcommand_help_describes_it_and_every_option_with_its_default(name):
    parser = _subparser(name)
    assert parser.description and len(parser.description) > 40, name
    options = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    assert options, name
    formatter = parser._get_formatter()
    for action in options:
        text = formatter._get_help_string(action)
        assert "default" in text, f"{name} {action.option_strings[0]}: {text!r}"

    result = run(name, "--help")
    assert result.returncode == 0, result.stderr
    flat = " ".join(result.stdout.split())
    assert " ".join(parser.description.split()[:8]) in flat
    for action in options:
        assert action.option_strings[-1] in result.stdout, (name, action.option_strings)
    assert flat.count("(default:") >= len(options), flat


def test_run_help_names_the_impl_choices_and_its_defaults():
    flat = " ".join(run("run", "--help").stdout.split())
    assert "'reference', 'ray' or 'module:factory'" in flat
    assert "now: reference)" in flat and "(default: reports)" in flat
    assert "(default: auto)" in flat


@pytest.mark.skipif(importlib.util.find_spec("conformance.matrix.cli") is None,
                    reason="conformance.matrix.cli (the fault matrix) is not in this checkout")
def test_matrix_subcommand_delegates_to_the_matrix_command():
    result = run("matrix", "--help")
    assert result.returncode == 0, result.stderr
    assert "python -m conformance matrix" in result.stdout
    for option in ("--impl", "--faults", "--jobs"):
        assert option in result.stdout
    assert "(default:" in result.stdout
    bad = run("matrix", "--faults", "nosuch-fault")
    assert bad.returncode == 2 and "nosuch-fault" in bad.stderr, bad.stderr
