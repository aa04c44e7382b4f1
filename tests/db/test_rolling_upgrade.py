"""The previous release beside an upgraded schema, for real: the code of the commit before
revision 0007 (taken from git) runs a worker; the current code upgrades the schema under it and
adds a photo, which the old worker still takes to ``done`` (migrations add before they remove);
restarted, the old worker says the schema is newer than it knows and exits 6."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conveyor.cli.exits import ExitCode
from tests.support.cli_run import CONVEYOR, clean_env

ROOT = Path(__file__).resolve().parents[2]
# The revision after which the previous release's code is taken.
FIRST_NEW = "src/conveyor/db/migrations/versions/0007_worker_processes_and_lane_pauses.py"


def _whole_history() -> None:
    """Deepen a shallow clone (a CI checkout may have one commit) from where it was cloned."""
    shallow = subprocess.run(
        ["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True
    )
    if shallow.stdout.strip() == "true":
        subprocess.run(
            ["git", "fetch", "--quiet", "--unshallow"],
            cwd=ROOT,
            capture_output=True,
            check=False,
            timeout=300,
        )


def _previous_release(into: Path) -> Path | None:
    """The ``src`` folder of the commit before revision 0007 was added, or None without the
    git history."""
    _whole_history()
    found = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "-1", "--", FIRST_NEW],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    commit = found.stdout.strip()
    if found.returncode != 0 or not commit:
        return None
    archive = subprocess.run(
        ["git", "archive", f"{commit}^", "src"], cwd=ROOT, capture_output=True, check=False
    )
    if archive.returncode != 0:
        return None
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def _old(args: list[str], cwd: Path, old_src: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from conveyor.cli.app import main; main()", *args],
        cwd=cwd,
        env=clean_env(PYTHONPATH=str(old_src), **env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _stage(db: Path, item_id: int) -> str:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT stage FROM media_items WHERE id = ?", (item_id,)).fetchone()
    return str(row[0])


def test_the_previous_release_works_through_an_upgrade_and_refuses_a_restart(
    tmp_path: Path, corpus: Path
) -> None:
    old_src = _previous_release(tmp_path / "previous")
    if old_src is None:
        # Not a service that CI must provide: a source archive or a clone that cannot be
        # deepened has no previous release to run.
        pytest.skip("no git history of the previous release (not a git clone, or shallow)")
    site = tmp_path / "site"
    site.mkdir()
    waiting = {"CONVEYOR_MEDIA__SHORT_WORKERS": "0", "CONVEYOR_MEDIA__LONG_WORKERS": "0"}
    made = _old(["albums", "create", "trip"], site, old_src, **waiting)
    assert made.returncode == 0, made.stderr
    worker = subprocess.Popen(
        [sys.executable, "-c", "from conveyor.cli.app import main; main()", "worker"],
        cwd=site,
        env=clean_env(
            PYTHONPATH=str(old_src),
            CONVEYOR_PIPELINE__WORKERS="0",
            CONVEYOR_MEDIA__SHORT_WORKERS="1",
            CONVEYOR_MEDIA__LONG_WORKERS="0",
            CONVEYOR_PIPELINE__POLL_INTERVAL="0.2",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(2)
        assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
        # The current code upgrades the schema under the running old worker …
        upgraded = subprocess.run(
            [CONVEYOR, "db", "upgrade"], cwd=site, env=clean_env(), capture_output=True, text=True
        )
        assert upgraded.returncode == 0, upgraded.stderr
        assert "upgraded from revision 0006" in upgraded.stdout
        # … and accepts a photo, which the old worker still takes to done.
        photo = corpus / "media" / "exif-samples__landscape_6.jpg"
        added = subprocess.run(
            [CONVEYOR, "media", "add", "trip", str(photo), "--json"],
            cwd=site,
            env=clean_env(**waiting),
            capture_output=True,
            text=True,
        )
        assert added.returncode == 0, added.stderr
        item_id = next(
            int(line["item"])
            for line in map(json.loads, added.stdout.splitlines())
            if line.get("item") is not None
        )
        db = site / "conveyor-data" / "conveyor.db"
        deadline = time.monotonic() + 120
        while _stage(db, item_id) != "done":
            assert worker.poll() is None, "the old worker died"
            assert time.monotonic() < deadline, f"the old worker left it {_stage(db, item_id)}"
            time.sleep(0.2)
    finally:
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0
    # Restarted, the old worker meets a schema newer than it knows: it says so and exits 6.
    again = _old(["worker"], site, old_src)
    assert again.returncode == ExitCode.SCHEMA
    assert "newer than this version of Conveyor knows" in again.stderr
