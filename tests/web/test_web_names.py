"""A file name that is not UTF-8 (an old disk, a camera card) is kept in one form however the
file came: the CLI's (``\\xNN`` for each odd byte, control characters escaped, a backslash
doubled), over the API's multipart and raw uploads, the page's form upload and its resumable
(tus) upload; the form gives the bytes back, and a long name is cut before it is escaped,
keeping its extension."""

from __future__ import annotations

import base64
import os
import random
import urllib.parse
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import Engine, select

from conveyor.cli.intake import shown_name
from conveyor.db.tables import audio_records
from conveyor.names import MAX_NAME, escaped_name, kept_name, name_bytes
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


def test_the_kept_form_gives_the_bytes_back_and_no_two_names_share_it() -> None:
    # A real newline and a backslash followed by n were one string before the backslash was
    # escaped too; so were the byte 0x85 and the character U+0085 (two bytes in UTF-8).
    pairs = [
        (b"new\nline.wav", b"new\\nline.wav"),
        (b"a\tb", b"a\\tb"),
        (b"\x85", "\x85".encode()),
        (b"\xff", b"\\xff"),
    ]
    for one, other in pairs:
        assert escaped_name(one) != escaped_name(other), (one, other)
    assert escaped_name(b"new\nline.wav") == "new\\nline.wav"
    assert escaped_name(b"new\\nline.wav") == "new\\\\nline.wav"
    assert escaped_name("x\x85\u00a0é".encode()) == "x\\xc2\\x85\\xc2\\xa0é"
    every_byte = bytes(range(1, 256))
    rng = random.Random(23)
    names = [every_byte, "café ünï 日本 🎙".encode(), *(bytes([b]) for b in every_byte)]
    names += [rng.randbytes(rng.randint(1, 40)) for _ in range(2000)]
    names += [
        bytes(rng.choice(b"\\xnt0af\n\t\xff\xc3\xa9") for _ in range(12)) for _ in range(2000)
    ]
    for raw in names:
        kept = escaped_name(raw)
        assert kept.isprintable() and "\n" not in kept, raw
        assert name_bytes(kept) == raw, raw
        assert escaped_name(os.fsdecode(raw)) == kept  # the same from a path's str
    # The documented way back, from the text alone.
    text = escaped_name(b"caf\xe9\n\\.wav")
    assert text == "caf\\xe9\\n\\\\.wav"
    assert text.encode().decode("unicode_escape").encode("latin-1") == b"caf\xe9\n\\.wav"


def test_a_long_name_is_cut_in_its_real_characters_and_keeps_its_extension() -> None:
    for raw in (
        b"a" * 250 + b"\xff" * 3 + b".wav",  # cut where an escape was half kept: `\xff\xf`
        "é".encode() * 300 + b".flac",
        b"\x01" * 200 + b".opus",
        b"take " * 80 + b".mp3",
        b"x" * 300,
        b"\xff" * 300 + b".a-very-long-ending-that-is-no-extension",
    ):
        kept = kept_name(raw, posix_name=True)
        assert kept is not None and len(kept) <= MAX_NAME, raw
        assert len(kept) > MAX_NAME - 4  # as much of the stem as fits, to one escape's length
        back = name_bytes(kept)  # whole escapes only: it reads back
        dot = raw.rfind(b".")
        if dot > 0 and len(raw) - dot <= 16:
            stem, extension = raw[:dot], raw[dot:]
            assert back.endswith(extension), kept[-20:]
            assert stem.startswith(back[: -len(extension)].rstrip())
        else:
            assert raw.startswith(back)
    # A name that fits is kept whole, an extension and all.
    fits = b"b" * (MAX_NAME - 4) + b".wav"
    assert kept_name(fits) == fits.decode()


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


def test_a_long_name_keeps_its_extension_over_http(make_site: MakeSite, corpus: Path) -> None:
    site = make_site()
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    api = {"Authorization": f"Bearer {site.tokens['alice']}"}
    long = b"\xff" * 100 + b"z" * 50 + b".wav"  # 450 characters as kept
    kept = kept_name(long)
    assert kept is not None and kept.endswith("\\xff.wav") and len(kept) <= MAX_NAME
    with TestClient(site.app) as client:
        body, kind = _multipart(long, wav)
        sent = client.post("/api/records", content=body, headers={**api, "Content-Type": kind})
        assert sent.status_code == 201, sent.text
        assert sent.json()["original_name"] == kept
        raw = client.post(
            "/api/records?keep_duplicate=true&name=" + urllib.parse.quote(b"\xff" * 70 + b".wav"),
            content=wav,
            headers=api,
        )
        assert raw.status_code == 201, raw.text
        assert raw.json()["original_name"] == "\\xff" * 62 + ".wav"
        slash = client.post(
            "/api/records?keep_duplicate=true&name=" + urllib.parse.quote("new\nline.wav"),
            content=wav,
            headers=api,
        )
        assert slash.json()["original_name"] == "new\\nline.wav"
