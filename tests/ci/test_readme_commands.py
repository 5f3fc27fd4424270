"""ci/readme_commands.py reads the README's two quick-start commands (CI runs them verbatim);
ci/rerun_skipped.py picks the tests that the README's environment skipped for want of Ray."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "ci" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


readme_commands, rerun_skipped = _load("readme_commands"), _load("rerun_skipped")


def test_the_readme_has_the_two_commands_a_fresh_machine_runs():
    main_job, tests = readme_commands.quick_start_commands((ROOT / "README.md").read_text())
    for command in (main_job, tests):
        assert command.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install"
                                  " -e "), command
    assert main_job.endswith("python -m conformance run --impl reference"), main_job
    assert "pytest" in tests and "ray" not in tests.split("pytest")[0], tests


@pytest.mark.parametrize("text", [
    "# x\n## Quick start\n```bash\none\n```\n## Next\n",
    "## Quick start\n```bash\none\n```\n```bash\ntwo\nthree\n```\n## Next\n",
    "## Quick start\n```bash\none\n```\n```bash\ntwo\n```\n```bash\nthree\n```\n## Next\n",
    "# no quick start\n## Next\n"])
def test_anything_but_two_one_line_commands_is_refused(text):
    with pytest.raises(SystemExit):
        readme_commands.quick_start_commands(text)


def test_tests_skipped_for_ray_become_node_ids_and_others_are_left(tmp_path):
    report = tmp_path / "junit.xml"
    report.write_text("""<?xml version="1.0"?><testsuites><testsuite>
      <testcase classname="tests.reference.tune.test_pbt" name="test_a[x-1]">
        <skipped message="could not import 'ray.tune': No module named 'ray'"/></testcase>
      <testcase classname="tests.reference.tune.test_pbt" name="test_b">
        <skipped message="needs a Docker engine"/></testcase>
      <testcase classname="tests.reference.tune.test_pbt" name="test_c"/>
      <testcase classname="" name="tests.reference.train.lightgbm.test_lightgbm_callback_vs_ray">
        <skipped message="collection skipped">('f.py', 30, "Skipped: could not import
          'ray.train.lightgbm': No module named 'ray'")</skipped></testcase>
      <testcase classname="tests.reference.tune.test_pbt" name="test_d">
        <skipped message="the array is empty"/></testcase>
    </testsuite></testsuites>""")
    assert rerun_skipped.skipped_for_ray(str(report)) == [
        "tests/reference/train/lightgbm/test_lightgbm_callback_vs_ray.py",
        "tests/reference/tune/test_pbt.py::test_a[x-1]"]


@pytest.mark.parametrize("value", ["3", "0", "main"])
def test_only_takes_one_of_the_two_commands(value):
    with pytest.raises(SystemExit, match="--only takes 1 or 2"):
        readme_commands.main(["--only", value])

