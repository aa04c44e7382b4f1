"""``--json`` output against its documented schema in docs/cli.md, parsed from real runs."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli_run import run

NO_WORKERS = {"CONVEYOR_PIPELINE__WORKERS": "0", "CONVEYOR_MEDIA__SHORT_WORKERS": "0"}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_records_stats_json_has_null_for_the_oldest_of_no_waiting_record(
    tmp_path: Path, corpus: Path
) -> None:
    empty = run(["records", "stats", "--json"], tmp_path)
    assert empty.returncode == 0, empty.stderr
    rows = json.loads(empty.stdout)
    assert rows and all(set(r) == {"domain", "stage", "waiting", "oldest_seconds"} for r in rows)
    assert {(r["waiting"], r["oldest_seconds"]) for r in rows} == {(0, None)}
    added = run(["records", "add", str(corpus / "audio" / "jfk.wav")], tmp_path, **NO_WORKERS)
    assert added.returncode == 0, added.stderr
    rows = json.loads(run(["records", "stats", "--json"], tmp_path).stdout)
    (waiting,) = [r for r in rows if r["waiting"]]
    assert (waiting["domain"], waiting["stage"], waiting["waiting"]) == ("audio", "uploaded", 1)
    assert isinstance(waiting["oldest_seconds"], float) and waiting["oldest_seconds"] >= 0
    assert all(r["oldest_seconds"] is None for r in rows if not r["waiting"])
    assert "`null` when `waiting` is 0" in DOCS.read_text()
