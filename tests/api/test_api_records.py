"""Audio records over HTTP through the ASGI client: upload, card, list, edit, text, refusals."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from conveyor.audio import queries
from conveyor.audio.stages import AUDIO
from conveyor.db.tables import audio_records, texts
from conveyor.pipeline.status import RecordState, status_of
from tests.support.api import Api, assert_error, counts, stored_objects


def test_upload_raw_body_answers_201_with_the_card(
    api: Api, client: TestClient, corpus: Path
) -> None:
    data = (corpus / "audio" / "jfk.wav").read_bytes()
    response = client.post(
        "/api/records?title=Inaugural&name=jfk.wav&language=en",
        content=data,
        headers={**api.alice, "Content-Type": "audio/wav"},
    )
    assert response.status_code == 201, response.text
    card = response.json()
    assert card.pop("duplicate") is False  # only the upload's answer says it
    assert card["stage"] == "uploaded"
    assert card["halted"] is False and card["done"] is False
    assert card["owner"] == "alice"
    assert card["title"] == "Inaugural"
    assert card["original_name"] == "jfk.wav"
    assert card["language"] == "en"
    assert card["links"] == {
        "self": f"/api/records/{card['id']}",
        "text": f"/api/records/{card['id']}/text",
        "events": f"/api/records/{card['id']}/events",
        "original": f"/api/records/{card['id']}/original",
    }
    assert response.headers["location"] == card["links"]["self"]
    assert client.get(card["links"]["self"], headers=api.alice).json() == card
    original = client.get(card["links"]["original"], headers=api.alice)
    assert original.status_code == 200
    assert original.content == data
    assert original.headers["content-type"] == "audio/wav"
    assert original.headers["accept-ranges"] == "bytes"
    events = client.get(card["links"]["events"], headers=api.alice).json()
    assert [(e["stage"], e["outcome"], e["origin"]) for e in events] == [
        ("uploaded", "accepted", "human")
    ]


@pytest.mark.parametrize("given", ["EN", "En", " en ", "\ten\n"])
def test_a_language_in_any_case_is_stored_lower_case(
    api: Api, client: TestClient, corpus: Path, given: str
) -> None:
    data = (corpus / "audio" / "jfk.wav").read_bytes()
    query = client.post(
        "/api/records",
        params={"language": given, "keep_duplicate": "true"},
        content=data,
        headers=api.alice,
    )
    assert query.status_code == 201, query.text
    assert query.json()["language"] == "en"
    form = client.post(
        "/api/records?keep_duplicate=true",
        data={"language": given},
        files={"file": ("jfk.wav", data, "application/octet-stream")},
        headers=api.alice,
    )
    assert form.status_code == 201, form.text
    assert form.json()["language"] == "en"


@pytest.mark.parametrize("given", ["ZZ", "e1", "english"])
def test_a_language_that_is_no_code_is_still_refused_in_any_case(
    api: Api, client: TestClient, corpus: Path, given: str
) -> None:
    data = (corpus / "audio" / "jfk.wav").read_bytes()
    form = client.post(
        "/api/records?keep_duplicate=true",
        data={"language": given},
        files={"file": ("jfk.wav", data, "application/octet-stream")},
        headers=api.alice,
    )
    assert form.status_code == 422, form.text
    assert "ISO 639-1" in form.json()["error"]["message"] or "longer than 3" in form.text
    assert stored_objects(api) == []


def test_upload_multipart_streams_the_file_part(api: Api, client: TestClient, corpus: Path) -> None:
    data = (corpus / "audio" / "jfk.mp3").read_bytes()
    response = client.post(
        "/api/records",
        data={"title": "From a form", "language": "en"},
        files={"file": ("speech.mp3", data, "application/octet-stream")},
        headers=api.alice,
    )
    assert response.status_code == 201, response.text
    card = response.json()
    assert card["title"] == "From a form"
    assert card["language"] == "en"
    assert card["original_name"] == "speech.mp3"
    assert client.get(card["links"]["original"], headers=api.alice).content == data


@pytest.mark.parametrize(
    "body, content_type",
    [
        (
            b'--xyz\r\nContent-Disposition: form-data; name="title"\r\n\r\nx\r\n--xyz--\r\n',
            "multipart/form-data; boundary=xyz",
        ),
        (b"garbage", "multipart/form-data"),
        (
            b'--xyz\r\nContent-Disposition: form-data; name="file"\r\n\r\nRIFF',
            "multipart/form-data; boundary=xyz",
        ),
    ],
    ids=["no-file-part", "no-boundary", "cut-inside-file"],
)
def test_malformed_multipart_is_400_and_nothing_is_kept(
    api: Api, client: TestClient, body: bytes, content_type: str
) -> None:
    before = counts(api.runtime.engine)
    response = client.post(
        "/api/records", content=body, headers={**api.alice, "Content-Type": content_type}
    )
    assert_error(response, 400)
    assert counts(api.runtime.engine) == before
    assert stored_objects(api) == []


def test_non_media_is_415_and_nothing_is_written(
    api: Api, client: TestClient, corpus: Path
) -> None:
    before = counts(api.runtime.engine)
    for path in (
        corpus / "audio" / "not_audio_text.wav",
        corpus / "media" / "pillow__transparent.png",
    ):
        response = client.post(
            "/api/records",
            files={"file": (path.name, path.read_bytes(), "audio/wav")},
            headers=api.alice,
        )
        assert_error(response, 415, "not_media")
    assert counts(api.runtime.engine) == before
    assert stored_objects(api) == []


def test_oversized_upload_is_413_and_nothing_is_written(api: Api, client: TestClient) -> None:
    limit = api.runtime.settings.api.max_upload_bytes
    before = counts(api.runtime.engine)
    # Declared too large: refused from Content-Length before the body is read.
    response = client.post("/api/records", content=b"\0" * (limit + 1), headers=api.alice)
    assert_error(response, 413, "too_large")

    # No Content-Length (chunked): refused while streaming, the partial object removed.
    def chunks() -> Any:
        for _ in range(limit // 65536 + 2):
            yield b"RIFF" + b"\0" * 65532

    response = client.post("/api/records", content=chunks(), headers=api.alice)
    assert_error(response, 413, "too_large")
    response = client.post(
        "/api/records",
        files={"file": ("big.wav", b"\0" * (limit + 10), "audio/wav")},
        headers=api.alice,
    )
    assert_error(response, 413, "too_large")
    assert counts(api.runtime.engine) == before
    assert stored_objects(api) == []


def test_empty_upload_is_422(api: Api, client: TestClient) -> None:
    response = client.post("/api/records", content=b"", headers=api.alice)
    assert_error(response, 422, "empty_file")
    response = client.post(
        "/api/records", files={"file": ("e.wav", b"", "audio/wav")}, headers=api.alice
    )
    assert_error(response, 422, "empty_file")
    assert counts(api.runtime.engine) == (0, 0, 0, 0)
    assert stored_objects(api) == []


def upload(
    client: TestClient, api: Api, path: Path, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    response = client.post(
        f"/api/records?name={path.name}&keep_duplicate=true",
        content=path.read_bytes(),
        headers=headers or api.alice,
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


def test_list_pages_with_a_cursor_and_filters(api: Api, client: TestClient, corpus: Path) -> None:
    wav = corpus / "audio" / "sense_and_sensibility_0880.wav"
    ids = [upload(client, api, wav)["id"] for _ in range(5)]
    upload(client, api, wav, api.bob)
    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/api/records", params=params, headers=api.alice).json()
        seen += [card["id"] for card in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(ids, reverse=True)
    with api.runtime.engine.begin() as conn:
        conn.execute(
            update(audio_records)
            .where(audio_records.c.id == ids[1])
            .values(halted_at=1.0, halt_reason="undecodable", halt_error="cannot decode")
        )
    halted = client.get("/api/records?halted=true", headers=api.alice).json()["items"]
    assert [c["id"] for c in halted] == [ids[1]]
    assert halted[0]["halt_reason"] == "undecodable"
    assert halted[0]["halted_at"] == "1970-01-01T00:00:01Z"
    running = client.get("/api/records?halted=false&stage=uploaded", headers=api.alice).json()
    assert len(running["items"]) == 4
    assert client.get("/api/records?stage=done", headers=api.alice).json()["items"] == []
    for malformed in ("nonsense", "cg", "cng", "cjA"):  # not "r<id>": junk, "r", "rx", "r0"
        error = assert_error(
            client.get(f"/api/records?cursor={malformed}", headers=api.alice), 400, "bad_cursor"
        )
        assert "malformed" in error["message"]
    assert_error(client.get("/api/records?stage=lost", headers=api.alice), 422)
    assert_error(client.get("/api/records?limit=0", headers=api.alice), 422)


def test_any_well_formed_cursor_is_accepted_as_documented(
    api: Api, client: TestClient, corpus: Path
) -> None:
    # Cursors are not signed: a hand-made `r<id>` lists from there, and the HTTP reference and
    # the error say "malformed", not "a cursor this server did not give out".
    wav = corpus / "audio" / "sense_and_sensibility_0880.wav"
    ids = [upload(client, api, wav)["id"] for _ in range(3)]
    forged = base64.urlsafe_b64encode(f"r{ids[2]}".encode()).decode().rstrip("=")
    page = client.get(f"/api/records?cursor={forged}", headers=api.alice).json()
    assert [c["id"] for c in page["items"]] == ids[1::-1]
    reference = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()
    assert "did not give out" not in reference and "we gave" not in reference
    assert "| 400 | `bad_cursor` | a malformed `cursor`" in reference
    error = assert_error(client.get("/api/records?cursor=!!", headers=api.alice), 400)
    assert "gave out" not in error["message"]


def test_patch_writes_only_the_owner_fields(api: Api, client: TestClient, corpus: Path) -> None:
    card = upload(client, api, corpus / "audio" / "jfk.wav")
    url = card["links"]["self"]
    patched = client.patch(url, json={"title": "JFK", "brief": "1961"}, headers=api.alice)
    assert patched.status_code == 200, patched.text
    assert (patched.json()["title"], patched.json()["brief"]) == ("JFK", "1961")
    # Absent fields are kept; null clears.
    patched = client.patch(url, json={"brief": None}, headers=api.alice).json()
    assert (patched["title"], patched["brief"]) == ("JFK", None)
    assert patched["stage"] == card["stage"]
    assert_error(client.patch(url, json={"stage": "done"}, headers=api.alice), 422)
    assert_error(client.patch(url, json={"title": "x" * 301}, headers=api.alice), 422)
    assert_error(
        client.patch(
            url, content=b"{not json", headers={**api.alice, "Content-Type": "application/json"}
        ),
        400,
        "bad_json",
    )


def test_text_in_every_format(api: Api, client: TestClient, corpus: Path) -> None:
    card = upload(client, api, corpus / "audio" / "jfk.wav")
    url = card["links"]["text"]
    error = assert_error(client.get(url, headers=api.alice), 404, "no_text")
    assert "uploaded" in error["message"]
    segments = [
        {"start": 0.0, "end": 2.5, "text": " And so my fellow Americans,"},
        {"start": 3660.25, "end": 3661.25, "text": " ask not --> what"},
    ]
    with api.runtime.engine.begin() as conn:
        conn.execute(
            texts.insert().values(
                record_id=card["id"],
                kind="transcript",
                body="And so my fellow Americans, ask not --> what",
                segments=segments,
                language="en",
                created_at=1.0,
            )
        )
        conn.execute(
            update(audio_records).where(audio_records.c.id == card["id"]).values(stage="done")
        )
    plain = client.get(url, headers=api.alice)
    assert plain.headers["content-type"] == "text/plain; charset=utf-8"
    assert plain.text == "And so my fellow Americans, ask not --> what"
    as_json = client.get(f"{url}?format=json", headers=api.alice).json()
    assert as_json == {
        "record_id": card["id"],
        "kind": "transcript",
        "language": "en",
        "no_speech": False,
        "text": "And so my fellow Americans, ask not --> what",
        # Channel and language of a segment are shown when known (channels heard apart, a
        # recording that switches language), null otherwise.
        "segments": [{**s, "channel": None, "language": None, "words": []} for s in segments],
    }
    srt = client.get(f"{url}?format=srt", headers=api.alice)
    assert srt.headers["content-type"].startswith("application/x-subrip")
    assert srt.text == (
        "1\n00:00:00,000 --> 00:00:02,500\nAnd so my fellow Americans,\n\n"
        "2\n01:01:00,250 --> 01:01:01,250\nask not --> what\n"
    )
    vtt = client.get(f"{url}?format=vtt", headers=api.alice)
    assert vtt.headers["content-type"].startswith("text/vtt")
    assert vtt.text == (
        "WEBVTT\n\n00:00:00.000 --> 00:00:02.500\nAnd so my fellow Americans,\n\n"
        "01:01:00.250 --> 01:01:01.250\nask not -> what\n"
    )
    assert_error(client.get(f"{url}?format=doc", headers=api.alice), 422)


def test_the_card_says_done_and_halted_as_the_record_status_does(
    api: Api, client: TestClient, corpus: Path
) -> None:
    """The card's ``done`` and ``halted`` are :func:`status_of`'s, which the pages and the CLI
    show: in every stage, halted or not, the three agree."""
    card = upload(client, api, corpus / "audio" / "jfk.wav")
    for stage in AUDIO.stage_names:
        for halted_at in (None, 5.0):
            with api.runtime.engine.begin() as conn:
                conn.execute(
                    update(audio_records)
                    .where(audio_records.c.id == card["id"])
                    .values(stage=stage, halted_at=halted_at, halt_reason=halted_at and "stuck")
                )
                row = queries.record_by_id(conn, card["id"], "alice")
            assert row is not None
            status = status_of(row, AUDIO, api.runtime.clock.now())
            shown = client.get(card["links"]["self"], headers=api.alice).json()
            assert (shown["done"], shown["halted"]) == (
                status.terminal,
                status.state is RecordState.HALTED,
            ), (stage, halted_at)
            assert shown["done"] is (stage == "done")
            assert shown["halted"] is (halted_at is not None)


def test_resume_is_409_unless_halted(api: Api, client: TestClient, corpus: Path) -> None:
    card = upload(client, api, corpus / "audio" / "jfk.wav")
    url = f"{card['links']['self']}/resume"
    assert_error(client.post(url, headers=api.alice), 409, "conflict")
    with api.runtime.engine.begin() as conn:
        conn.execute(
            update(audio_records)
            .where(audio_records.c.id == card["id"])
            .values(halted_at=5.0, halt_reason="stuck", halt_error="stuck at uploaded")
        )
    halted = client.get(card["links"]["self"], headers=api.alice).json()
    assert (halted["halted"], halted["halt_reason"], halted["stage"]) == (True, "stuck", "uploaded")
    resumed = client.post(url, headers=api.alice)
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["halted"] is False
    assert resumed.json()["stage"] == "uploaded"
    events = client.get(card["links"]["events"], headers=api.alice).json()
    assert (events[-1]["outcome"], events[-1]["origin"]) == ("resumed", "human")


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": "Basic YWxpY2U6eA=="},
        {"Authorization": "Bearer"},
    ],
    ids=["none", "unknown", "basic", "empty"],
)
def test_api_routes_need_a_bearer_token(client: TestClient, headers: dict[str, str]) -> None:
    response = client.get("/api/records", headers=headers)
    assert_error(response, 401)
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert_error(client.post("/api/records", content=b"RIFF", headers=headers), 401)


def test_health_metrics_and_openapi_are_open(client: TestClient) -> None:
    health = client.get("/healthz")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "database": "ok", "storage": "ok", "workers": False}
    metrics = client.get("/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    assert "conveyor_http_requests_total" in metrics.text
    schema = client.get("/openapi.json").json()
    assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert_error(client.get("/nowhere"), 404, "not_found")


def test_values_the_database_cannot_store_are_422_not_500(
    api: Api, client: TestClient, corpus: Path
) -> None:
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    card = upload(client, api, corpus / "audio" / "jfk.wav")
    nul = "a\x00b"
    assert_error(
        client.post("/api/records", params={"title": nul}, content=wav, headers=api.alice), 422
    )
    assert_error(
        client.post(
            "/api/records", data={"title": nul}, files={"file": ("a.wav", wav)}, headers=api.alice
        ),
        422,
    )
    assert_error(client.patch(card["links"]["self"], json={"brief": nul}, headers=api.alice), 422)
    assert_error(client.post("/api/albums", json={"name": nul}, headers=api.alice), 422)
    assert_error(client.get("/api/files/a%00b", headers=api.alice), 404)
    long_name = client.post(
        "/api/records?keep_duplicate=true",
        files={"file": ("C:\\x\\" + "n" * 400 + "\x01.wav", wav)},
        headers=api.alice,
    )
    assert long_name.status_code == 201, long_name.text
    # Cut on the real name before escaping, keeping the extension (conveyor.names.kept_name).
    assert long_name.json()["original_name"] == "n" * 251 + ".wav"


def test_a_multipart_body_padded_past_the_limit_is_413(
    api: Api, client: TestClient, corpus: Path
) -> None:
    wav = (corpus / "audio" / "jfk.wav").read_bytes()[:100_000]
    limit = api.runtime.settings.api.max_upload_bytes

    def body() -> Any:
        yield b'--b\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'
        yield wav
        yield b"\r\n"
        for n in range(limit // 60_000 + 10):
            yield f'--b\r\nContent-Disposition: form-data; name="pad{n}"\r\n\r\n'.encode()
            yield b"x" * 60_000 + b"\r\n"
        yield b"--b--\r\n"

    response = client.post(
        "/api/records",
        content=body(),
        headers={**api.alice, "Content-Type": "multipart/form-data; boundary=b"},
    )
    assert_error(response, 413, "too_large")
    assert counts(api.runtime.engine) == (0, 0, 0, 0)
    assert stored_objects(api) == []
