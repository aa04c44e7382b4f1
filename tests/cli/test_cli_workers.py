"""A real ``conveyor worker`` seen and steered from the command line: it answers ``/healthz``
and ``/readyz`` (other paths 404), ``workers list``/``show`` show it, ``lanes pause``/``resume``
are stored cluster-wide, and ``workers drain`` makes it exit 0."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from conveyor.cli.exits import ExitCode
from tests.support.cli_run import CONVEYOR, clean_env, invoke, run


def _read_until(proc: subprocess.Popen[str], pattern: str, timeout: float = 60) -> str:
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
        if re.search(pattern, line):
            return seen
    raise AssertionError(f"no {pattern!r} in the worker's output:\n{seen}")


def test_a_worker_is_listed_probed_paused_and_drained(tmp_path: Path) -> None:
    env = {"CONVEYOR_PIPELINE__POLL_INTERVAL": "0.1", "CONVEYOR_PIPELINE__BEAT_INTERVAL": "0.2"}
    assert run(["db", "upgrade"], tmp_path).returncode == 0
    proc = subprocess.Popen(
        [CONVEYOR, "worker", "--lanes", "short,long", "--metrics-port", "0"],
        cwd=tmp_path,
        env=clean_env(**env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen = _read_until(proc, r"metrics at http://")
        found = re.search(r"metrics at (http://\S+)/metrics", seen)
        assert found is not None
        base = found.group(1)
        _read_until(proc, r"worker pool started")
        assert httpx.get(f"{base}/healthz", timeout=10).json() == {
            "status": "ok",
            "database": "ok",
        }
        ready = httpx.get(f"{base}/readyz", timeout=10)
        assert ready.status_code == 200 and ready.json()["ready"] is True
        assert httpx.get(f"{base}/anything", timeout=10).status_code == 404
        assert "conveyor_step_outcomes_total" in httpx.get(f"{base}/metrics", timeout=10).text

        listed = run(["workers", "list", "--json"], tmp_path, **env)
        assert listed.returncode == 0, listed.stderr
        [me] = json.loads(listed.stdout)
        assert me["pid"] == proc.pid and me["state"] == "running"
        assert me["host"] == socket.gethostname() and set(me["lanes"]) == {"short", "long"}
        # The plain tables have one word per header and cell: awk counts the same columns.
        for args in (["workers", "list"], ["lanes", "list"]):
            plain = run(args, tmp_path, **env)
            assert plain.returncode == 0, plain.stderr
            lines = plain.stdout.strip().splitlines()
            assert len(lines) >= 2, plain.stdout
            assert {len(line.split()) for line in lines} == {len(lines[0].split())}, lines
        shown = run(["workers", "show", str(me["id"])], tmp_path, **env)
        assert shown.returncode == 0 and "holds      nothing" in shown.stdout
        assert run(["workers", "show", "999"], tmp_path).returncode == ExitCode.NOT_FOUND

        assert run(["lanes", "pause", "short", "--reason", "bad deploy"], tmp_path).returncode == 0
        lanes = json.loads(run(["lanes", "list", "--json"], tmp_path).stdout)
        short = next(lane for lane in lanes if lane["lane"] == "short")
        assert short["paused"] and short["reason"] == "bad deploy"
        assert run(["lanes", "pause", "nope"], tmp_path).returncode == ExitCode.USAGE
        assert "resumed" in run(["lanes", "resume", "short"], tmp_path).stdout

        drained = run(["workers", "drain", socket.gethostname(), "--json"], tmp_path)
        assert drained.returncode == 0, drained.stderr
        assert json.loads(drained.stdout) == {"draining": [me["id"]]}
        assert proc.wait(timeout=30) == 0, "a drained worker exits 0"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    after = json.loads(run(["workers", "list", "--stopped", "--json"], tmp_path).stdout)
    assert [p["state"] for p in after] == ["stopped"]
    assert run(["workers", "drain", "no-such-host"], tmp_path).returncode == ExitCode.NOT_FOUND


def test_records_add_and_media_add_obey_a_paused_lane(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Their workers are a worker process like `conveyor worker`'s (D8): a paused lane is not
    # worked on by them either; what they accepted waits, and the command says for what.
    monkeypatch.chdir(tmp_path)
    assert invoke("lanes", "pause", "short", "--reason", "bad deploy").exit_code == 0
    assert invoke("albums", "create", "Trip").exit_code == 0
    added = invoke("media", "add", "Trip", str(corpus / "media" / "exif-samples__Canon_40D.jpg"))
    assert added.exit_code == ExitCode.OK, added.stderr
    assert "the short lane is paused" in added.stderr
    assert "conveyor lanes resume short" in added.stderr
    item = json.loads(invoke("media", "show", "1", "--json").stdout)
    assert (item["stage"], item["done"], item["halted"]) == ("uploaded", False, False)

    assert invoke("lanes", "pause", "audio").exit_code == 0
    recorded = invoke("records", "add", str(corpus / "audio" / "jfk.wav"))
    assert recorded.exit_code == ExitCode.OK, recorded.stderr
    assert "the audio lane is paused" in recorded.stderr
    card = json.loads(invoke("records", "show", "1", "--json").stdout)
    assert (card["stage"], card["halted"]) == ("uploaded", False)
    # Both ran as registered worker processes, stopped now.
    listed = json.loads(invoke("workers", "list", "--stopped", "--json").stdout)
    assert [p["state"] for p in listed] == ["stopped", "stopped"]
