"""The code base stays clean under the project's ruff configuration."""

import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).parents[1]


def test_ruff_check():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    result = subprocess.run(
        [ruff, "check", "sklearn_dpu", "tests", "benchmarks", "examples"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
