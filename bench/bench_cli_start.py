"""CPU time of a ``conveyor`` command's start, and the heavy libraries it loads (issue 23's fast
start: ``conveyor --help`` and ``conveyor records list`` under 0.3 s of CPU on a quiet machine).

Each command runs ``--repeat`` times as a user runs it (the console script, in a fresh folder
with the embedded database already made); the report gives the least and the median user+system
CPU of the child, the load average, and which of the heavy libraries (PyAV, pyvips, the
recognizer, numpy, boto3, FastAPI, Alembic…) the command imported. A heavy library in the list
is a regression whatever the machine's load; the times depend on it.

Run: ``.venv/bin/python bench/bench_cli_start.py [--repeat 7]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CONVEYOR = str(Path(sys.executable).with_name("conveyor"))
COMMANDS = (["--help"], ["--version"], ["records", "list", "-q"], ["records", "stats", "-q"])
HEAVY = (
    "av",
    "pyvips",
    "faster_whisper",
    "ctranslate2",
    "numpy",
    "boto3",
    "botocore",
    "fastapi",
    "starlette",
    "uvicorn",
    "alembic",
    "httpx",
    "prometheus_client",
)
_PROBE = (
    "import sys\n"
    "sys.argv = ['conveyor', *sys.argv[1:]]\n"
    "try:\n"
    "    from conveyor.cli.app import main\n"
    "    main()\n"
    "except SystemExit:\n"
    "    pass\n"
    "finally:\n"
    f"    print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
)


def _child_cpu(args: list[str], cwd: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(args, cwd=cwd, capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    """Run each command ``--repeat`` times and print one line per command."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    env_note = f"load average {os.getloadavg()[0]:.1f} at start"
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        subprocess.run([CONVEYOR, "db", "upgrade"], cwd=cwd, capture_output=True, check=True)
        print(f"{'command':<24} {'least':>8} {'median':>8}  heavy imports   ({env_note})")
        for command in COMMANDS:
            times = [_child_cpu([CONVEYOR, *command], cwd) for _ in range(options.repeat)]
            probe = subprocess.run(
                [sys.executable, "-c", _PROBE, *command],
                cwd=cwd,
                capture_output=True,
                text=True,
                check=False,
            )
            heavy = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "?"
            name = " ".join(command)
            print(f"{name:<24} {min(times):>7.3f}s {statistics.median(times):>7.3f}s  {heavy}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
