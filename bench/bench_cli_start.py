"""CPU time of a ``conveyor`` command's start, and the heavy libraries it loads (issue 23's fast
start: ``conveyor --help`` and ``conveyor records list`` under 0.3 s of CPU on a quiet machine).

Each command runs ``--repeat`` times as a user runs it (the console script, in a fresh folder
with the embedded database already made); the report gives the least and the median user+system
CPU of the child, the load average, and which of the heavy libraries (PyAV, pyvips, the
recognizer, numpy, boto3, FastAPI, Alembic…) the command imported. A heavy library in the list
is a regression whatever the machine's load; the times depend on it.

Beside the commands it times the **floors**: interpreters that only import the libraries a
command cannot do without (Typer and Rich for any command; SQLAlchemy with the SQLite driver and
pydantic-settings for one that reads the database), so a reader can tell what Conveyor's own
code adds. A floor runs under the console script's collector policy (off during the start, no
walk over the heap at exit: :mod:`conveyor.cli.collector`), and the largest once more with
Python's default collector, which shows what that policy saves. The rounds interleave every
command and floor, so a change in the machine's load touches them alike.

Every child runs with a bytecode cache, as an installed package has (pip compiles it) and a
checkout gets on its first run: ``PYTHONPYCACHEPREFIX`` points at a scratch folder (nothing is
written into the source tree) and one run of each, not counted, fills it. One more row runs
``records list`` as a shell with ``PYTHONDONTWRITEBYTECODE`` set runs a checkout: Conveyor's
own modules compiled from source on every start (the libraries' caches still read).

Run: ``.venv/bin/python bench/bench_cli_start.py [--repeat 9]``.
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
    "jinja2",
    "prometheus_client",
    "argon2",
)
#: What a command cannot start without, imported by a bare interpreter (name → code).
_LIBRARIES = {
    "python": "pass",
    "typer+rich": "import typer, rich.console, rich.table",
    "+sqlalchemy+pydantic-settings": (
        "import typer, rich.console, rich.table, pydantic_settings, sqlalchemy\n"
        "sqlalchemy.create_engine('sqlite://').connect().close()"
    ),
    # What a command on PostgreSQL loads besides; one on SQLite no longer does (the tables
    # attach their indexes' postgresql_* options only as a schema is made).
    "+the postgresql dialect": (
        "import typer, rich.console, rich.table, pydantic_settings, sqlalchemy\n"
        "import sqlalchemy.dialects.postgresql\n"
        "sqlalchemy.create_engine('sqlite://').connect().close()"
    ),
}
#: The console script's collector policy around a floor's imports.
_POLICY = "import gc\ngc.disable()\n{}\ngc.freeze()\n"
FLOORS = {
    **{f"floor: {name}": _POLICY.format(code) for name, code in _LIBRARIES.items()},
    "floor: +sqlalchemy+pydantic-settings, default gc": _LIBRARIES["+sqlalchemy+pydantic-settings"],
}
#: The row run without a bytecode cache for Conveyor's modules.
UNCACHED = "records list -q, PYTHONDONTWRITEBYTECODE"
_PROBE = (
    "import sys\n"
    "sys.argv = ['conveyor', *sys.argv[1:]]\n"
    "try:\n"
    "    from conveyor.cli.entry import main\n"
    "    main()\n"
    "except SystemExit:\n"
    "    pass\n"
    "finally:\n"
    f"    print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
)


def _child_cpu(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(args, cwd=cwd, env=env, capture_output=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    """Run each command and floor ``--repeat`` times, interleaved; print one line for each."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    options = parser.parse_args()
    env_note = f"load average {os.getloadavg()[0]:.1f} at start"
    runs: dict[str, list[str]] = {" ".join(c): [CONVEYOR, *c] for c in COMMANDS}
    runs.update({name: [sys.executable, "-c", code] for name, code in FLOORS.items()})
    runs[UNCACHED] = [CONVEYOR, "records", "list", "-q"]
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder) / "run"
        cwd.mkdir()
        cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = str(Path(folder) / "bytecode")
        uncached = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        uncached.pop("PYTHONPYCACHEPREFIX", None)
        env = {name: uncached if name == UNCACHED else cached for name in runs}
        subprocess.run([CONVEYOR, "db", "upgrade"], cwd=cwd, capture_output=True, check=True)
        for name, args in runs.items():  # fills the bytecode cache; not counted
            _child_cpu(args, cwd, env[name])
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(options.repeat):
            for name, args in runs.items():
                times[name].append(_child_cpu(args, cwd, env[name]))
        heavy: dict[str, str] = {}
        for command in COMMANDS:
            probe = subprocess.run(
                [sys.executable, "-c", _PROBE, *command],
                cwd=cwd,
                env=cached,
                capture_output=True,
                text=True,
                check=False,
            )
            lines = probe.stderr.strip().splitlines()
            heavy[" ".join(command)] = lines[-1] if lines else "?"
    print(f"{'command':<50} {'least':>8} {'median':>8}  heavy imports   ({env_note})")
    for name, spent in times.items():
        shown = heavy.get(name, "")
        print(f"{name:<50} {min(spent):>7.3f}s {statistics.median(spent):>7.3f}s  {shown}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
