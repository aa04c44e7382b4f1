"""Every text people give is held to its one declaration (conveyor.limits) on the command line and
over HTTP alike (issue 23 §4): one past the limit, or a control character in one line, exits 2
or answers 422 with nothing stored; the limit itself is accepted by both. And the CLI's limited
options and the API's limited fields are the same set, so a new field cannot be limited in one
only."""

from __future__ import annotations

import io
import random
import wave
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select
from typer.core import TyperArgument, TyperOption

from conveyor.accounts import add_user, create_token, set_admin
from conveyor.cli.exits import ExitCode
from conveyor.cli.texts import TextParser
from conveyor.db.tables import (
    album_links,
    album_shares,
    albums,
    api_tokens,
    audio_records,
    files,
    lane_pauses,
    owner_vocabulary,
)
from conveyor.errors import RejectedInput
from conveyor.limits import (
    ALBUM_NAME,
    HINTS,
    LANE_REASON,
    LINK_LABEL,
    PROOFREAD_SEGMENT,
    RECORD_BRIEF,
    RECORD_TITLE,
    TEXT_LIMITS,
    TOKEN_LABEL,
    TOPIC,
    USER_NAME,
    TextLimit,
)
from tests.support.api import Api, MakeApi
from tests.support.cli_run import commands, invoke
from tests.support.multipart_body import multipart

_TABLES = (
    files,
    audio_records,
    albums,
    album_shares,
    album_links,
    owner_vocabulary,
    api_tokens,
    lane_pauses,
)
#: A user whose name is as long as a user name may be (shared with at the limit).
LONG_USER = "u" * USER_NAME.longest


def _stored(engine: Engine) -> tuple[int, ...]:
    with engine.connect() as conn:
        return tuple(
            conn.execute(select(func.count()).select_from(t)).scalar_one() for t in _TABLES
        )


def _wav() -> bytes:
    """A short WAV of noise, other bytes each call (no upload is a duplicate of another)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(random.randbytes(3200))
    return out.getvalue()


@dataclass
class World:
    """The CLI and the API on one database: the CLI's owner `me` and the API's alice each have
    an album `Trip`, and a user of the longest name exists to share with."""

    api: Api
    client: TestClient
    env: dict[str, str]
    folder: Path
    album: int

    def wav_file(self) -> str:
        path = self.folder / f"r{random.randrange(10**9)}.wav"
        path.write_bytes(_wav())
        return str(path)


@dataclass(frozen=True)
class Case:
    """One limited field: the command that sets it, the request that sets it."""

    limit: TextLimit
    cli: Callable[[World, str], list[str]] | None
    http: Callable[[World, str], Any] | None


def _upload(world: World, **params: str) -> Any:
    return world.client.post(
        "/api/records",
        params=params,
        content=_wav(),
        headers={**world.api.alice, "Content-Type": "application/octet-stream"},
    )


def _upload_form(world: World, field: str, value: str) -> Any:
    body, kind = multipart((field, None, value.encode()), ("file", "a.wav", _wav()))
    return world.client.post(
        "/api/records", content=body, headers={**world.api.alice, "Content-Type": kind}
    )


def _post(path: str, **body: Any) -> Callable[[World, str], Any]:
    def send(world: World, value: str) -> Any:
        filled = {k: (value if v is None else v) for k, v in body.items()}
        url = path.format(album=world.album)
        return world.client.post(url, json=filled, headers=world.api.alice)

    return send


def _pause_lane(world: World, reason: str) -> Any:
    """Pause the audio lane over HTTP as alice, made an administrator (lanes are theirs)."""
    set_admin(world.api.runtime.engine, "alice", True)
    return world.client.post(
        "/api/admin/lanes/audio/pause", params={"reason": reason}, headers=world.api.alice
    )


CASES = {
    "records add --title": Case(
        RECORD_TITLE,
        lambda w, v: ["records", "add", "--title", v, w.wav_file()],
        lambda w, v: _upload(w, title=v),
    ),
    "title as a form field": Case(RECORD_TITLE, None, lambda w, v: _upload_form(w, "title", v)),
    "records add --hints": Case(
        HINTS,
        lambda w, v: ["records", "add", "--hints", v, w.wav_file()],
        lambda w, v: _upload(w, hints=v),
    ),
    "hints as a form field": Case(HINTS, None, lambda w, v: _upload_form(w, "hints", v)),
    "vocabulary set": Case(
        HINTS,
        lambda w, v: ["vocabulary", "set", v],
        lambda w, v: w.client.put("/api/vocabulary", json={"hints": v}, headers=w.api.alice),
    ),
    "albums create": Case(
        ALBUM_NAME, lambda w, v: ["albums", "create", v], _post("/api/albums", name=None)
    ),
    "albums share": Case(
        USER_NAME,
        lambda w, v: ["albums", "share", "Trip", v],
        _post("/api/albums/{album}/shares", user=None, role="viewer"),
    ),
    "albums link create --label": Case(
        LINK_LABEL,
        lambda w, v: ["albums", "link", "create", "Trip", "--label", v],
        _post("/api/albums/{album}/links", label=None),
    ),
    "lanes pause --reason": Case(
        LANE_REASON, lambda w, v: ["lanes", "pause", "audio", "--reason", v], _pause_lane
    ),
    # A token is made from the shell only (the web app's form is held to the same limit).
    "tokens create --label": Case(
        TOKEN_LABEL, lambda w, v: ["tokens", "create", "alice", "--label", v], None
    ),
}


def _refused(limit: TextLimit) -> dict[str, str]:
    bad = {"one past the limit": "x" * (limit.longest + 1)}
    if limit.one_line:
        bad["a bell"] = "a\x07b"
        bad["a DEL"] = "a\x7fb"
        if not limit.collapses:
            bad["a newline"] = "a\nb"
    else:
        bad["a NUL"] = "a\x00b"
    if not limit.blank:
        bad["only spaces"] = "   "
    return bad


@pytest.fixture
def world(
    make_api: MakeApi, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[World]:
    monkeypatch.chdir(tmp_path)
    env = {
        "CONVEYOR_DATABASE__URL": engine.url.render_as_string(hide_password=False),
        "CONVEYOR_PIPELINE__WORKERS": "0",
    }
    api = make_api()
    add_user(engine, api.runtime.clock, LONG_USER)
    assert invoke("albums", "create", "Trip", **env).exit_code == 0
    with TestClient(api.app) as client:
        album = client.post("/api/albums", json={"name": "Trip"}, headers=api.alice).json()
        yield World(api, client, env, tmp_path, int(album["id"]))


@pytest.mark.parametrize("name", list(CASES))
def test_a_text_past_its_limit_is_refused_by_the_cli_and_the_api_with_nothing_stored(
    world: World, engine: Engine, name: str
) -> None:
    case = CASES[name]
    for how, value in _refused(case.limit).items():
        before = _stored(engine)
        if case.cli is not None:
            result = invoke(*case.cli(world, value), **world.env)
            shown = (how, result.output)
            assert result.exit_code == ExitCode.USAGE, shown
            assert "Invalid value for" in result.stderr and case.limit.what in result.stderr, shown
            if how == "one past the limit":
                assert f"longer than {case.limit.longest:,} characters" in result.stderr, shown
            assert "Traceback" not in result.output, shown
            assert _stored(engine) == before, shown
        if case.http is not None:
            answer = case.http(world, value)
            assert answer.status_code == 422, (how, answer.text)
            body = answer.json()
            assert set(body) == {"error"} and body["error"]["status"] == 422, body
            assert body["error"]["code"] == "invalid_request", body
            assert _stored(engine) == before, (how, answer.text)


@pytest.mark.parametrize("name", list(CASES))
def test_a_text_as_long_as_its_limit_is_accepted_by_the_cli_and_the_api(
    world: World, engine: Engine, name: str
) -> None:
    case = CASES[name]
    exact = LONG_USER if case.limit is USER_NAME else "y" * case.limit.longest
    if case.cli is not None:
        before = _stored(engine)
        result = invoke(*case.cli(world, exact), **world.env)
        assert result.exit_code == ExitCode.OK, result.output
        assert _stored(engine) != before
    if case.http is not None:
        if case.limit is ALBUM_NAME:
            exact = "z" * case.limit.longest  # not the CLI's album (another owner's anyway)
        answer = case.http(world, exact)
        assert answer.status_code in (200, 201), answer.text


# --- The CLI's limited options and the API's limited fields are one set. ---

#: Every field of a request that changes something, with a length limit, and the declaration
#: it is held to: the API's side of the comparison below.
API_FIELDS: dict[str, TextLimit] = {
    "title": RECORD_TITLE,
    "brief": RECORD_BRIEF,
    "hints": HINTS,
    "topics": TOPIC,
    "segments": PROOFREAD_SEGMENT,
    "name": ALBUM_NAME,
    "user": USER_NAME,
    "label": LINK_LABEL,
    "reason": LANE_REASON,
}
#: Limited over HTTP, with no command that sets them (the pages and the API edit them).
NO_COMMAND = {RECORD_BRIEF, TOPIC, PROOFREAD_SEGMENT}
#: Limited on the command line, with no request that sets them: tokens are made in the shell
#: and the web app (whose form takes the same declaration).
NO_REQUEST = {TOKEN_LABEL}
#: Bounded parameters that are no text people keep: a raw upload's file name (cut to 255 by
#: conveyor.names, never refused for its length), an upload's language code.
NOT_TEXTS = {("query", "name"), ("query", "language")}


def _limited_api_fields(openapi: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(where, field name, its string schema) of every length-limited text of a request that
    changes something: query, path and body fields (array items by the array's name)."""
    schemas = openapi["components"]["schemas"]

    def resolve(schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            schema = schemas[schema["$ref"].rsplit("/", 1)[-1]]
        return schema

    def strings(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
        schema = resolve(schema)
        for option in schema.get("anyOf", []):
            yield from strings(option)
        if schema.get("type") == "array":
            yield from strings(schema["items"])
        if schema.get("type") == "string" and "maxLength" in schema:
            yield schema

    for path, methods in openapi["paths"].items():
        if not path.startswith("/api/"):
            continue
        for method, operation in methods.items():
            if method not in ("post", "put", "patch", "delete"):
                continue
            for param in operation.get("parameters", []):
                if param["in"] in ("query", "path"):
                    for schema in strings(param["schema"]):
                        yield param["in"], param["name"], schema
            for content in operation.get("requestBody", {}).get("content", {}).values():
                body = resolve(content.get("schema", {}))
                for field, schema in body.get("properties", {}).items():
                    for string in strings(schema):
                        yield "body", field, string


def _cli_limits() -> dict[tuple[str, str], TextLimit]:
    found = {}
    for name, command in commands():
        for param in command.params:
            assert isinstance(param, (TyperArgument, TyperOption)), param
            parser = param.type_descriptor.parameter_info.parser
            if isinstance(parser, TextParser):
                found[(name, str(param.name))] = parser.limit
    return found


def test_every_limited_api_field_is_held_to_its_declaration(api: Api) -> None:
    seen: set[TextLimit] = set()
    for where, field, schema in _limited_api_fields(api.app.openapi()):
        if (where, field) in NOT_TEXTS:
            continue
        assert field in API_FIELDS, f"{where} field {field!r} has a limit no declaration names"
        limit = API_FIELDS[field]
        assert schema["maxLength"] == limit.longest, (where, field, schema)
        assert schema.get("pattern") == limit.pattern, (where, field, schema)
        seen.add(limit)
    assert seen == set(API_FIELDS.values())


def test_the_cli_limits_the_texts_the_api_limits_and_no_others() -> None:
    cli = _cli_limits()
    assert set(cli.values()) == (set(API_FIELDS.values()) - NO_COMMAND) | NO_REQUEST
    assert set(API_FIELDS.values()) | NO_REQUEST == set(TEXT_LIMITS)
    # Every option or argument named as an API field reads it with its declaration.
    for name, command in commands():
        for param in command.params:
            if param.name in ("title", "hints", "label") or (name, param.name) == (
                "lanes pause",
                "reason",
            ):
                assert (name, param.name) in cli, f"{name} {param.name} is not held to a limit"
    assert cli[("albums create", "name")] is ALBUM_NAME


@pytest.mark.parametrize("label", ["x" * (TOKEN_LABEL.longest + 1), "phone\x1b[2J"])
def test_a_tokens_note_past_its_limit_is_refused_by_every_entry_point(
    make_api: MakeApi, engine: Engine, label: str
) -> None:
    """The web app's tokens page makes tokens too: the accounts layer holds the note to the
    same declaration as `tokens create --label`, with nothing stored."""
    api = make_api()
    before = _stored(engine)
    with pytest.raises(RejectedInput) as refused:
        create_token(engine, api.runtime.clock, "alice", label=label)
    assert refused.value.reason == "invalid_request"
    assert "the token's note" in str(refused.value)
    assert _stored(engine) == before
    assert create_token(engine, api.runtime.clock, "alice", label="y" * 100).label == "y" * 100
