"""The README's Python code runs as written.

Every fenced ``python`` block of README.md is executed, in order, in a fresh
namespace per block and a temporary working directory (the blocks may write
files such as a budget ledger).
"""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).parents[1] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)


def test_the_readme_has_python_code():
    assert BLOCKS, "README.md has no ```python block; this test would check nothing"


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_block_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = compile(BLOCKS[index], f"README.md python block {index + 1}", "exec")
    exec(code, {"__name__": "__readme__"})
