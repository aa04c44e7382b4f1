"""What ``records add --json`` and ``media add --json`` end with: a ``result`` per record or item
they took in, also when the run processes none of it (no workers, as docs/cli.md's schema
says). Real processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from conveyor.cli.exits import ExitCode
from tests.support.cli_run import run
from tests.support.media import make_photo


def _env(tmp_path: Path, engine: Engine, config: str) -> dict[str, str]:
    (tmp_path / "conveyor.toml").write_text('[storage]\nroot = "data"\n' + config)
    url = engine.url.render_as_string(hide_password=False)
    return {"CONVEYOR_DATABASE__URL": url.replace("postgresql+psycopg", "postgresql")}


def _events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_without_workers_the_json_run_ends_with_each_records_result(
    tmp_path: Path, corpus: Path, engine: Engine
) -> None:
    env = _env(tmp_path, engine, "[pipeline]\nworkers = 0\n[media]\nshort_workers = 0\n")
    wav = corpus / "audio" / "jfk.wav"
    other = tmp_path / "other.wav"
    other.write_bytes(wav.read_bytes() + b"\0\0")
    added = run(["records", "add", "--json", str(wav), str(other)], tmp_path, **env)
    assert added.returncode == ExitCode.OK, added.stderr
    events = _events(added.stdout)
    assert [e["event"] for e in events] == ["accepted", "accepted", "result", "result", "summary"]
    results = [e for e in events if e["event"] == "result"]
    assert [r["record"] for r in results] == [e["record"] for e in events[:2]]
    for result in results:
        card = result["card"]
        assert card["id"] == result["record"] and card["stage"] == "uploaded"
        assert card["done"] is False and card["transcript"] is None
    assert events[-1]["unfinished"] == 2

    assert run(["albums", "create", "Trip"], tmp_path, **env).returncode == 0
    photo = make_photo(tmp_path / "p.jpg", 1)
    items = run(["media", "add", "Trip", "--json", str(photo)], tmp_path, **env)
    assert items.returncode == ExitCode.OK, items.stderr
    events = _events(items.stdout)
    assert [e["event"] for e in events] == ["accepted", "result", "summary"]
    assert events[1]["item"] == events[0]["item"] == events[1]["card"]["id"]
    assert events[1]["card"]["done"] is False
