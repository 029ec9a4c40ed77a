"""environment.yml and pyproject.toml declare the same dependencies."""

import re
import tomllib

import yaml

from tests.conftest import ROOT


def test_environment_yml_mirrors_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = set(project["dependencies"]) | set(project["optional-dependencies"]["test"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert set(pip) - {"-e ."} == declared


def test_readme_opens_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text().split("```")[1]
    assert re.findall(r"^make (\w+)", head, re.M) == ["demo", "test"]
