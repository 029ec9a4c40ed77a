"""The package stays typed and free of unused or undefined names (mypy and ruff, as `make lint`)."""

import subprocess
import sys

from tests.conftest import ROOT


def test_mypy_finds_no_type_errors() -> None:
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_finds_no_errors() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "evalnb", "tests", "bench", "examples"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
