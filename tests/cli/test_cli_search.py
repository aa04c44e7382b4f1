"""``conveyor records search`` finds what an owner's recordings say, as the web app does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conveyor.audio import queries
from conveyor.audio.intake import accept_audio
from conveyor.cli.exits import ExitCode
from conveyor.cli.settings import make_runtime
from tests.support.cli_run import invoke


def test_records_search_marks_the_words_and_says_when(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runtime = make_runtime()
    record_id = accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "audio" / "jfk.wav",
        owner="ann",
        original_name="speech.wav",
        keep_duplicate=True,
    )
    segments = [
        {"start": 0.0, "end": 5.0, "text": "And so my fellow Americans,"},
        {"start": 65.0, "end": 70.0, "text": "ask not what your country can do for you."},
    ]
    with runtime.engine.begin() as conn:
        queries.upsert_text(
            conn,
            record_id=record_id,
            kind="transcript",
            body=" ".join(str(s["text"]) for s in segments),
            segments=segments,
            language="en",
            now=runtime.clock.now(),
        )
    runtime.engine.dispose()
    found = invoke("records", "search", "country", "--owner", "ann")
    assert found.exit_code == 0, found.stderr
    assert "speech.wav" in found.stdout and "1:05" in found.stdout
    as_json = json.loads(invoke("records", "search", "country", "--owner", "ann", "--json").stdout)
    assert [(h["record_id"], h["kind"], h["start"], h["matches"]) for h in as_json] == [
        (record_id, "transcript", 65.0, ["country"])
    ]
    # The API's hits, word for word (one shape: Hit.shown), the CLI adding the name and the
    # matched words.
    assert as_json[0]["snippet"] == [
        {"text": "ask not what your ", "match": False},
        {"text": "country", "match": True},
        {"text": " can do for you.", "match": False},
    ]
    assert {h.pop("name") for h in as_json} == {"speech.wav"}
    assert [h.pop("matches") for h in as_json] == [["country"]]
    assert as_json == _api_hits("ann", "country")
    other = invoke("records", "search", "country", "--owner", "bob")
    assert other.exit_code == 0 and other.stdout == ""
    assert "no recording of bob's says 'country'" in other.stderr
    assert invoke("records", "search", "x" * 201, "--owner", "ann").exit_code == ExitCode.USAGE
    # Without --owner it searches `me`'s, as every other command defaults to them.
    mine = invoke("records", "search", "country")
    assert mine.exit_code == 0 and "no recording of me's says 'country'" in mine.stderr


def _api_hits(owner: str, query: str) -> list[dict[str, object]]:
    """``GET /api/records?q=``'s ``hits`` for ``owner``, from an app on the database of the
    commands run in this folder."""
    from fastapi.testclient import TestClient

    from conveyor.accounts import add_user, create_token
    from conveyor.api.app import create_app

    runtime = make_runtime()
    add_user(runtime.engine, runtime.clock, owner)
    token = create_token(runtime.engine, runtime.clock, owner).token
    with TestClient(create_app(runtime, run_workers=False)) as client:
        answer = client.get(
            "/api/records", params={"q": query}, headers={"Authorization": f"Bearer {token}"}
        )
    runtime.engine.dispose()
    assert answer.status_code == 200, answer.text
    hits: list[dict[str, object]] = answer.json()["hits"]
    return hits
