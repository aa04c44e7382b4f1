"""A record whose provider is unreachable says why it waits (card, ``ingest``, history), and a
record deleted while ``ingest`` waits on it is reported, not a crash; on SQLite and PostgreSQL.

The provider is OpenAI-compatible at a loopback port nothing listens on: every submit is
refused before anything starts (``ProviderBusy``), which is waiting, not failure (D6).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

from sqlalchemy import Engine

from conveyor.cli.exits import ExitCode
from tests.support.cli_run import CONVEYOR, clean_env, run
from tests.support.servers import free_port

WAITING = re.compile(
    r"^record (\d+): openai is unreachable \(ConnectError: .*\); retrying (in \d+ s|now)$",
    re.MULTILINE,
)


def _setup(tmp_path: Path, engine: Engine) -> dict[str, str]:
    """``conveyor.toml`` with an unreachable openai provider and short retries; the env that
    points the command at the test database."""
    (tmp_path / "conveyor.toml").write_text(
        '[transcription]\nprovider = "openai"\n'
        f'[transcription.openai]\nbase_url = "http://127.0.0.1:{free_port()}/v1"\n'
        "[pipeline]\nworkers = 1\nretry_base = 0.2\nretry_max = 0.4\npoll_interval = 0.1\n"
    )
    url = engine.url.render_as_string(hide_password=False).replace(
        "postgresql+psycopg", "postgresql"
    )
    return {"CONVEYOR_DATABASE__URL": url}


def _ingest(tmp_path: Path, env: dict[str, str], *files: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [CONVEYOR, "ingest", "--keep-duplicates", *map(str, files)],
        cwd=tmp_path,
        env=clean_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_lines(proc: subprocess.Popen[str], count: int, timeout: float = 120) -> str:
    """Read stderr until ``count`` waiting lines were printed."""
    assert proc.stderr is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(WAITING.findall(seen)) < count:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    assert len(WAITING.findall(seen)) >= count, seen
    return seen


def test_a_record_waiting_on_an_unreachable_provider_says_why(
    tmp_path: Path, corpus: Path, engine: Engine
) -> None:
    env = _setup(tmp_path, engine)
    proc = _ingest(tmp_path, env, corpus / "audio" / "LDC93S1.flac")
    try:
        seen = _wait_for_lines(proc, 1)
        # Several more refusals (0.2-0.4 s apart) pass without another line.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            shown = run(["records", "show", "1", "--json"], tmp_path, **env)
            wait = json.loads(shown.stdout)["provider_wait"]
            if wait is not None and wait["tries"] >= 4:
                break
            time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=120)
    err = seen + rest
    assert proc.returncode == ExitCode.INTERRUPTED, err
    assert [m.group(1) for m in WAITING.finditer(err)] == ["1"], err  # once, not per try
    assert "Traceback" not in err
    # Stopped while waiting, after intake: the accepted ids are said as a stop during intake says
    # them, before the summary.
    assert "accepted records 1; `conveyor worker` processes them\n1 file: 1 accepted" in err, err

    card = json.loads(run(["records", "show", "1", "--json"], tmp_path, **env).stdout)
    assert card["stage"] == "normalized" and not card["halted"] and card["attempts"] == 0
    wait = card["provider_wait"]
    assert wait["provider"] == "openai" and wait["tries"] >= 4
    assert wait["error"].startswith("openai is unreachable (ConnectError:")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", wait["next_try_at"])

    shown = run(["records", "show", "1"], tmp_path, **env)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"^  waiting    openai is unreachable \(ConnectError:", shown.stdout, re.M)
    assert re.search(r"^  tries      \d+ since it entered normalized$", shown.stdout, re.M)
    assert re.search(r"^  next try   \d{4}-\d\d-\d\dT[\d:]+Z$", shown.stdout, re.M)
    assert re.search(r"^  next       at stage normalized, ", shown.stdout, re.M)

    # The history holds the first refusal of the run, not one row per try.
    events = run(["records", "events", "1"], tmp_path, **env).stdout
    postponed = [line for line in events.splitlines() if " postponed " in line]
    assert len(postponed) == 1, events
    assert "openai is unreachable" in postponed[0] and "normalized" in postponed[0]


def test_a_record_deleted_while_ingest_waits_is_reported_and_the_others_waited_for(
    tmp_path: Path, corpus: Path, engine: Engine
) -> None:
    env = _setup(tmp_path, engine)
    audio = corpus / "audio" / "LDC93S1.flac"
    proc = _ingest(tmp_path, env, audio, audio)
    try:
        seen = _wait_for_lines(proc, 2)
        first = run(["records", "delete", "1"], tmp_path, **env)
        assert first.returncode == 0, first.stderr
        time.sleep(1.5)  # ingest notices, and keeps waiting for record 2
        assert proc.poll() is None, seen
        second = run(["records", "delete", "2"], tmp_path, **env)
        assert second.returncode == 0, second.stderr
        _, rest = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    err = seen + rest
    assert proc.returncode == ExitCode.HALTED, err
    assert "record 1 was deleted meanwhile; not waiting for it" in err
    assert "record 2 was deleted meanwhile; not waiting for it" in err
    assert "2 accepted as records (0 done, 0 halted, 2 deleted meanwhile)" in err
    assert "Traceback" not in err and "AssertionError" not in err and "unexpected" not in err
