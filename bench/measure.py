"""Running one measured child process: its time, its peak RSS (read from outside), its answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Run:
    """One child process.

    Attributes:
        seconds: the work's own time when the child reports one (Python workers), else the
            process's wall time (command-line tools).
        wall: wall time of the whole process in seconds.
        cpu: CPU seconds (user + system, all threads) of the work: the child's own count when it
            reports one (Python workers: the step, imports excluded), else the whole process's
            (``wait4``). On a shared machine this moves far less than wall time.
        peak_rss_mb: the child's peak resident set size in MiB (``ru_maxrss`` from ``wait4``).
        answer: the JSON object a Python worker printed last, else empty.
        error: the last line of stderr when the process failed, else None.
    """

    seconds: float
    wall: float
    cpu: float
    peak_rss_mb: float
    answer: dict[str, Any]
    error: str | None


def run(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> Run:
    """Run ``argv`` to completion and measure it from outside."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        text=True,
    )
    # Read both pipes to the end first (a full pipe would block the child), then reap it with
    # wait4, the one call that hands back the child's own rusage.
    out, err = _drain(proc)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    answer: dict[str, Any] = {}
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            answer = json.loads(line)
            break
    error = None
    if proc.returncode != 0:
        lines = [line for line in err.strip().splitlines() if line.strip()]
        error = lines[-1] if lines else f"exit status {proc.returncode}"
    return Run(
        seconds=float(answer.get("seconds", wall)),
        wall=wall,
        cpu=float(answer.get("cpu_seconds", usage.ru_utime + usage.ru_stime)),
        peak_rss_mb=usage.ru_maxrss / 1024,
        answer=answer,
        error=error,
    )


def _drain(proc: subprocess.Popen[str]) -> tuple[str, str]:
    stdout, stderr = proc.stdout, proc.stderr
    assert stdout is not None and stderr is not None
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.append(stderr.read()))
    reader.start()
    out = stdout.read()
    reader.join()
    return out, chunks[0] if chunks else ""


def python_worker(task: str, **kwargs: Any) -> Run:
    """Run ``bench.worker`` ``task`` with ``kwargs`` in a fresh interpreter."""
    return run([sys.executable, "-m", "bench.worker", task, json.dumps(kwargs)], cwd=ROOT)


def best(runs: list[Run]) -> Run | None:
    """The fastest successful run (least disturbed by other load), with the least CPU time and
    the highest peak RSS of all of them."""
    ok = [r for r in runs if r.error is None]
    if not ok:
        return None
    fastest = min(ok, key=lambda r: r.seconds)
    return Run(
        fastest.seconds,
        fastest.wall,
        min(r.cpu for r in ok),
        max(r.peak_rss_mb for r in ok),
        fastest.answer,
        None,
    )


def load_average() -> str:
    """The 1, 5 and 15 minute load averages and the CPU count, for the report."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"
