"""The local recognizer processes: started, watched, replaced and killed.

:class:`RecognizerSupervisor` keeps ``[transcription] processes`` warm recognizers
(``python -m conveyor.providers.whisper_job --serve``) alive while jobs wait, each in its own
session apart from every worker, replaces one that crashed, kills one that hung, and tells
what became of a job (its folder's files: see :mod:`conveyor.providers.local`).
``<work_dir>/.lock`` serialises starts and job taking between threads and processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import conveyor
from conveyor.config import TranscriptionSettings
from conveyor.files import write_atomic
from conveyor.providers.base import PollResult

__all__ = [
    "ERROR_FILE",
    "EXIT_FILE",
    "JOB_FILE",
    "LOCK_FILE",
    "LOG_FILE",
    "PID_FILE",
    "RESULT_FILE",
    "RecognizerSupervisor",
    "finished",
    "read_json",
    "read_pid",
    "result_written",
    "start_ticks",
    "write_job_file",
]

# The job folder layout, shared with the provider and conveyor.providers.whisper_job.
JOB_FILE = "job.json"
RESULT_FILE = "result.json"
ERROR_FILE = "error.json"
PID_FILE = "pid.json"
LOG_FILE = "job.log"
LOCK_FILE = ".lock"
EXIT_FILE = "exit.json"
_SERVERS_DIR = ".servers"
# A job may take this many times its audio's length (at least _MIN_HANG s) before its
# recognizer counts as hung.
_HANG_FACTOR = 10.0
_MIN_HANG = 600.0


class RecognizerSupervisor:
    """The recognizer processes of one job folder ``work_dir``.

    Args:
        settings: ``[transcription]``; ``processes`` and ``idle_exit`` are used here.
        work_dir: the folder of the job folders (absolute).
        hang_after: seconds a job may run before its recognizer counts as hung; default
            max(600, 10 x the audio's length).
    """

    def __init__(
        self, settings: TranscriptionSettings, work_dir: Path, hang_after: float | None
    ) -> None:
        self._settings = settings
        self._work_dir = work_dir
        self._hang_after = hang_after
        self._children: dict[int, subprocess.Popen[bytes]] = {}  # slot → recognizer
        self._mutex = threading.Lock()

    def ensure_recognizers(self) -> None:
        """While jobs wait, keep ``processes`` recognizers alive, replacing dead ones. Hold the
        lock."""
        self._reap_children()
        if not any(_waiting(job_dir) for job_dir in self.job_dirs()):
            return
        servers = self._work_dir / _SERVERS_DIR
        servers.mkdir(exist_ok=True)
        for slot in range(self._settings.processes):
            running = _read_pid_file(servers / f"slot-{slot}.json")
            if running is not None and self.alive(running):
                continue
            self._start(slot)

    def job_dirs(self) -> Iterator[Path]:
        for job_dir in self._work_dir.iterdir():
            if not job_dir.name.startswith(".") and job_dir.is_dir():
                yield job_dir

    def _start(self, slot: int) -> None:
        env = dict(os.environ)
        env["HF_HUB_OFFLINE"] = "1"  # belt and braces: the job loads with local_files_only too
        package_root = str(Path(conveyor.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root, env.get("PYTHONPATH", "")) if p
        )
        servers = self._work_dir / _SERVERS_DIR
        command = [
            sys.executable,
            "-m",
            "conveyor.providers.whisper_job",
            "--serve",
            str(self._work_dir),
            str(slot),
            str(self._settings.idle_exit),
        ]
        with (servers / f"slot-{slot}.log").open("wb") as log:
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self._work_dir,
                env=env,
                start_new_session=True,  # not killed with the worker's process group
                close_fds=True,
            )
        self._children[slot] = child
        write_job_file(
            servers / f"slot-{slot}.json",
            {"pid": child.pid, "start_ticks": start_ticks(child.pid), "started_at": time.time()},
        )

    def _reap_children(self) -> None:
        """Collect exit codes of recognizers this provider started (and free their zombies); the
        job a dead one was working on learns how it ended."""
        for slot, child in list(self._children.items()):
            returncode = child.poll()
            if returncode is None:
                continue
            del self._children[slot]
            for job_dir in self.job_dirs():
                pid = read_pid(job_dir)
                ours = pid is not None and pid[0] == child.pid
                if ours and finished(job_dir) is None and not (job_dir / EXIT_FILE).exists():
                    write_job_file(job_dir / EXIT_FILE, {"returncode": returncode})

    def alive(self, pid: tuple[int, int | None]) -> bool:
        for child in self._children.values():
            if child.pid == pid[0]:
                if child.poll() is None:
                    return True
                self._reap_children()
                return False
        return process_alive(*pid)

    def kill(self, pid: tuple[int, int | None]) -> None:
        with contextlib.suppress(ProcessLookupError):
            # A recognizer leads its own session: kill its whole process group.
            os.killpg(pid[0], signal.SIGKILL)
        for child in list(self._children.values()):
            if child.pid == pid[0]:
                child.wait()
        self._reap_children()

    def _hang_limit(self, job_dir: Path) -> float:
        if self._hang_after is not None:
            return self._hang_after
        try:
            duration = float(read_json(job_dir / JOB_FILE).get("duration") or 0.0)
        except (OSError, ValueError):
            duration = 0.0
        return max(_MIN_HANG, _HANG_FACTOR * duration)

    def state(self, job_dir: Path) -> PollResult:
        if not job_dir.is_dir():
            return PollResult("unknown")
        ended = finished(job_dir)
        if ended is not None:
            return ended
        pid = read_pid(job_dir)
        if pid is None:
            return PollResult("running")  # queued
        if self.alive(pid):
            limit = self._hang_limit(job_dir)
            if time.time() - _started_at(job_dir) <= limit:
                return PollResult("running")
            # Hung: kill it (a fresh recognizer takes the waiting jobs) and fail the job.
            write_job_file(job_dir / EXIT_FILE, {"hung_after": limit})
            self.kill(pid)
            self.ensure_recognizers()
        # The process may have written its result just before exiting: look once more.
        ended = finished(job_dir)
        if ended is not None:
            return ended
        return PollResult(
            "failed",
            error=(
                f"recognizer process exited without a result ({_exit_text(job_dir)}); "
                f"log tail: {_log_tail(job_dir)}"
            ),
        )

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        # The mutex guards this object's child table; flock makes threads and processes agree.
        with self._mutex, (self._work_dir / LOCK_FILE).open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def finished(job_dir: Path) -> PollResult | None:
    with contextlib.suppress(FileNotFoundError):
        return PollResult("done", raw=(job_dir / RESULT_FILE).read_bytes())
    with contextlib.suppress(FileNotFoundError):
        raw = (job_dir / ERROR_FILE).read_bytes()
        try:
            error = str(json.loads(raw)["error"])
        except (ValueError, KeyError, TypeError):
            error = raw.decode("utf-8", "replace")
        return PollResult("failed", error=f"recognizer failed: {error}")
    return None


def result_written(job_dir: Path) -> bool:
    return (job_dir / RESULT_FILE).exists() or (job_dir / ERROR_FILE).exists()


def _waiting(job_dir: Path) -> bool:
    """A job no recognizer has taken yet."""
    return (
        (job_dir / JOB_FILE).exists()
        and not (job_dir / PID_FILE).exists()
        and finished(job_dir) is None
    )


def _started_at(job_dir: Path) -> float:
    try:
        return float(read_json(job_dir / PID_FILE)["started_at"])
    except (OSError, ValueError, KeyError, TypeError):
        return time.time()


def read_pid(job_dir: Path) -> tuple[int, int | None] | None:
    return _read_pid_file(job_dir / PID_FILE)


def _read_pid_file(path: Path) -> tuple[int, int | None] | None:
    try:
        recorded = read_json(path)
        ticks = recorded.get("start_ticks")
        return int(recorded["pid"]), (int(ticks) if ticks is not None else None)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command name, which is in parentheses and may contain spaces.
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])


def process_alive(pid: int, start_ticks: int | None) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)  # no /proc: existence is the best we can tell
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # exited, not yet reaped by the worker that started it
        return False
    return start_ticks is None or int(fields[19]) == start_ticks


def _exit_text(job_dir: Path) -> str:
    try:
        ended = read_json(job_dir / EXIT_FILE)
        if "hung_after" in ended:
            return (
                f"hung: no result after {float(ended['hung_after']):.0f} s, so it was killed; "
                "a fresh recognizer takes the waiting jobs"
            )
        returncode = int(ended["returncode"])
    except (OSError, ValueError, KeyError, TypeError):
        return "exit status unknown: it was started by another worker process"
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def _log_tail(job_dir: Path, lines: int = 5, limit: int = 2000) -> str:
    try:
        with (job_dir / LOG_FILE).open("rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - limit))
            tail = log.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    kept = [line.strip() for line in tail.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) if kept else "(empty log)"


def read_json(path: Path) -> dict[str, Any]:
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return document


def write_job_file(path: Path, document: dict[str, Any]) -> None:
    """Write a job file atomically (temp, fsync, rename): a reader sees all of it or nothing.

    Shared by the provider and the recognizer process (:mod:`conveyor.providers.whisper_job`).
    """
    write_atomic(path, json.dumps(document, ensure_ascii=False))
