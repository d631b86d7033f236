"""The README's demo and the gallery examples keep running."""

import pathlib
import runpy

import matplotlib.pyplot as plt
import pytest

from sklearn_dpu import demo

EXAMPLES = sorted((pathlib.Path(__file__).parents[1] / "examples").glob("*.py"))


def test_demo_runs_and_writes_its_outputs(tmp_path, capsys):
    demo.main(["--output-dir", str(tmp_path), "--repeats", "2"])
    printed = capsys.readouterr().out
    for heading in ("private search", "private fit", "Deleting", "reload", "Privacy report"):
        assert heading in printed
    assert (tmp_path / "privacy_utility.png").stat().st_size > 10_000
    assert (tmp_path / "diabetes_model.skops").exists()
    assert (tmp_path / "budget.sqlite").exists()


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script):
    runpy.run_path(str(script), run_name="__main__")
    plt.close("all")
