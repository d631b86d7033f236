"""Run every ``bench_*.py`` in this folder in turn (pass --quick for smoke sizes)."""

import pathlib
import subprocess
import sys

here = pathlib.Path(__file__).parent
for script in sorted(here.glob("bench_*.py")):
    print(f"\n### {script.name}", flush=True)
    subprocess.run([sys.executable, str(script), *sys.argv[1:]], check=True)
