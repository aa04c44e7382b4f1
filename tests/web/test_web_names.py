"""A file name that is not UTF-8 (an old disk, a camera card) is kept in one form however the
file came: the CLI's (``\\xNN`` for each odd byte, control characters escaped), over the API's
multipart and raw uploads, the page's form upload and its resumable (tus) upload."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from conveyor.cli.intake import shown_name
from conveyor.db.tables import audio_records
from conveyor.names import kept_name
from tests.support.web import MakeSite, sign_in

ODD = b"caf\xe9 \xff\x01.wav"
KEPT = "caf\\xe9 \\xff\\x01.wav"
TUS = {"Tus-Resumable": "1.0.0"}


def _multipart(filename: bytes, data: bytes) -> tuple[bytes, str]:
    # Built by hand: an HTTP client library would encode a str name as UTF-8.
    body = (
        b'--b0undary\r\nContent-Disposition: form-data; name="file"; filename="'
        + filename
        + b'"\r\nContent-Type: application/octet-stream\r\n\r\n'
        + data
        + b"\r\n--b0undary--\r\n"
    )
    return body, "multipart/form-data; boundary=b0undary"


def _name(engine: Engine, record_id: int) -> str:
    with engine.connect() as conn:
        return str(
            conn.execute(
                select(audio_records.c.original_name).where(audio_records.c.id == record_id)
            ).scalar_one()
        )


def test_one_form_for_the_cli_and_http() -> None:
    # The CLI's shown name of such a path (Python holds its odd bytes as surrogate escapes)
    # is the name an HTTP upload keeps from the same bytes.
    assert shown_name(os.fsdecode(ODD)) == KEPT == kept_name(ODD) == kept_name(os.fsdecode(ODD))
    assert kept_name("café.wav") == "café.wav"
    assert kept_name(b"C:\\photos\\two\nlines.jpg") == "two\\nlines.jpg"
    assert kept_name(b"  ") is None


def test_a_name_that_is_not_utf8_is_kept_escaped_over_http(
    make_site: MakeSite, corpus: Path
) -> None:
    site = make_site()
    engine = site.runtime.engine
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    api = {"Authorization": f"Bearer {site.tokens['alice']}"}
    with TestClient(site.app) as client:
        body, kind = _multipart(ODD, wav)
        sent = client.post("/api/records", content=body, headers={**api, "Content-Type": kind})
        assert sent.status_code == 201, sent.text
        assert sent.json()["original_name"] == KEPT
        raw = client.post(
            "/api/records?keep_duplicate=true&name=caf%E9%20%FF.wav", content=wav, headers=api
        )
        assert raw.status_code == 201, raw.text
        assert raw.json()["original_name"] == "caf\\xe9 \\xff.wav"
        csrf = sign_in(client, "alice")
        page = client.post(
            "/records/upload",
            content=_multipart(ODD, wav)[0].replace(
                b"--b0undary\r\n",
                b'--b0undary\r\nContent-Disposition: form-data; name="keep_duplicate"\r\n\r\n'
                b"true\r\n--b0undary\r\n",
                1,
            ),
            headers={"Content-Type": kind, "X-CSRF-Token": csrf, "Accept": "application/json"},
        )
        assert page.status_code == 201, page.text
        assert _name(engine, page.json()["id"]) == KEPT
        meta = ",".join(
            f"{k} {base64.b64encode(v).decode()}"
            for k, v in (("filename", ODD), ("target", b"records"), ("keep_duplicate", b"1"))
        )
        made = client.post(
            "/uploads",
            headers={
                **TUS,
                "X-CSRF-Token": csrf,
                "Upload-Length": str(len(wav)),
                "Upload-Metadata": meta,
            },
        )
        assert made.status_code == 201, made.text
        done = client.patch(
            made.headers["Location"],
            content=wav,
            headers={
                **TUS,
                "X-CSRF-Token": csrf,
                "Content-Type": "application/offset+octet-stream",
                "Upload-Offset": "0",
            },
        )
        assert done.status_code == 204, done.text
        record_id = int(done.headers["Conveyor-Result"].rsplit("/", 1)[1])
        assert _name(engine, record_id) == KEPT
