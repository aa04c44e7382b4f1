"""The OpenAPI schema: served, precise, and schemathesis finds no server error and no answer the
schema does not document (status, content type, headers, body)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from conveyor.error_codes import ErrorCode
from tests.support.api import Api, MakeApi


@pytest.fixture
def seeded(make_api: MakeApi, corpus: Path) -> Api:
    """An app where alice has a record, an album and a photo (ids 1), so fuzzing finds them."""
    api = make_api(api={"max_upload_bytes": 512 * 1024})
    # Event streams end at once: an endless stream would never return to the fuzzer.
    api.app.state.conveyor.closing.set()
    with TestClient(api.app) as client:
        wav = (corpus / "audio" / "jfk.wav").read_bytes()
        assert client.post("/api/records", content=wav, headers=api.alice).status_code == 201
        assert client.post("/api/albums", json={"name": "a"}, headers=api.alice).status_code == 201
        photo = (corpus / "media" / "exif-samples__Canon_40D.jpg").read_bytes()
        response = client.post("/api/albums/1/items", content=photo, headers=api.alice)
        assert response.status_code == 201, response.text
    return api


OPERATIONS = [
    ("POST", "/api/records"),
    ("GET", "/api/records"),
    ("GET", "/api/records/{record_id}"),
    ("PATCH", "/api/records/{record_id}"),
    ("GET", "/api/records/{record_id}/text"),
    ("GET", "/api/records/{record_id}/events"),
    ("GET", "/api/records/{record_id}/original"),
    ("POST", "/api/records/{record_id}/resume"),
    ("DELETE", "/api/records/{record_id}"),
    ("PUT", "/api/records/{record_id}/proofread"),
    ("DELETE", "/api/records/{record_id}/proofread"),
    ("GET", "/api/records/{record_id}/topics"),
    ("PUT", "/api/records/{record_id}/topics"),
    ("GET", "/api/topics"),
    ("GET", "/api/vocabulary"),
    ("PUT", "/api/vocabulary"),
    ("DELETE", "/api/vocabulary"),
    ("POST", "/api/albums"),
    ("GET", "/api/albums"),
    ("GET", "/api/albums/{album_id}"),
    ("POST", "/api/albums/{album_id}/items"),
    ("GET", "/api/albums/{album_id}/events"),
    ("DELETE", "/api/albums/{album_id}"),
    ("GET", "/api/shared-albums"),
    ("GET", "/api/albums/{album_id}/shares"),
    ("POST", "/api/albums/{album_id}/shares"),
    ("DELETE", "/api/albums/{album_id}/shares/{user}"),
    ("GET", "/api/albums/{album_id}/links"),
    ("POST", "/api/albums/{album_id}/links"),
    ("DELETE", "/api/albums/{album_id}/links/{link_id}"),
    ("GET", "/api/items/{item_id}"),
    ("POST", "/api/items/{item_id}/resume"),
    ("DELETE", "/api/items/{item_id}"),
    ("GET", "/api/files/{key}"),
    ("GET", "/healthz"),
    ("GET", "/metrics"),
    ("POST", "/v1/audio/transcriptions"),
    ("GET", "/v1/models"),
]
ADMIN = [
    ("GET", "/api/admin/workers"),
    ("POST", "/api/admin/workers/{target}/drain"),
    ("GET", "/api/admin/lanes"),
    ("POST", "/api/admin/lanes/{lane}/pause"),
    ("POST", "/api/admin/lanes/{lane}/resume"),
]
# Fuzzed: every operation but the OpenAI-compatible upload, which waits for a transcript and is
# 504 by design when none comes (tests/api/test_openai_route.py drives it with the real client),
# and the admin routes (their own tests drive them with an admin token).
FUZZED = [op for op in OPERATIONS if op != ("POST", "/v1/audio/transcriptions")]


# Every answer must be one the schema documents: no 5xx, a documented status, content type,
# headers and body shape (zero mismatches).
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


# schemathesis' own pytest plugin (``from_fixture``) does not run under pytest 9 yet, so each
# operation's strategy is driven by Hypothesis here, one test per operation.
@pytest.mark.parametrize(("method", "path"), FUZZED, ids=[f"{m} {p}" for m, p in FUZZED])
def test_schemathesis_finds_no_mismatch(seeded: Api, method: str, path: str) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", seeded.app)
    operation = schema[path][method]

    @given(case=operation.as_strategy())
    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def fuzz(case: Any) -> None:
        case.call_and_validate(headers=seeded.alice, checks=CHECKS)

    fuzz()


def test_openapi_documents_every_route_with_bearer_auth(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operations = {
        (method.upper(), path): op
        for path, item in spec["paths"].items()
        for method, op in item.items()
    }
    expected = set(OPERATIONS) | set(ADMIN)
    assert set(operations) == expected
    for (_method, path), op in operations.items():
        secured = op.get("security") == [{"bearer": []}]
        assert secured == path.startswith(("/api/", "/v1/")), path
        if path.startswith(("/api/", "/v1/")):
            assert "401" in op["responses"], path
    upload = operations[("POST", "/api/records")]["requestBody"]["content"]
    assert set(upload) == {"multipart/form-data", "application/octet-stream"}
    card = spec["components"]["schemas"]["RecordCard"]
    assert {"stage", "halted", "halt_reason", "halted_at", "title", "brief", "links"} <= set(
        card["properties"]
    )


def test_every_422_is_documented_as_the_one_error_shape(client: TestClient, api: Api) -> None:
    # FastAPI's own HTTPValidationError was documented for GET /api/files/{key} and others,
    # while every 422 is sent as {"error": {...}}.
    spec = client.get("/openapi.json").json()
    assert "HTTPValidationError" not in str(spec)
    assert "ValidationError" not in spec["components"]["schemas"]
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if "422" in op["responses"]:
                content = op["responses"]["422"]["content"]
                assert content == {"application/json": {"schema": error_ref}}, (method, path)
    assert "422" in spec["paths"]["/api/files/{key}"]["get"]["responses"]
    response = client.get("/api/files/" + "k" * 300, headers=api.alice)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"


def test_the_readme_curl_section_shows_raw_pcm() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    curl = readme.split("## HTTP service", 1)[1].split("## Configuration", 1)[0]
    assert "raw_pcm=true" in curl and "16 kHz mono" in curl


def test_the_schema_documents_outages_and_resolves_every_reference(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    text = json.dumps(spec)
    assert "$defs" not in text  # the text route's JSON is a component, not an inline schema
    for ref in set(re.findall(r'"#/components/schemas/([^"]+)"', text)):
        assert ref in spec["components"]["schemas"], ref
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if path.startswith("/api"):
                assert "503" in op["responses"], (method, path)
    original = spec["paths"]["/api/records/{record_id}/original"]["get"]["responses"]["200"]
    assert list(original["content"]) == ["*/*"]
    assert "400" in spec["paths"]["/api/records"]["get"]["responses"]
    assert "413" in spec["paths"]["/api/records/{record_id}"]["patch"]["responses"]


UPLOADS = [
    ("/api/records", "post"),
    ("/api/albums/{album_id}/items", "post"),
    ("/v1/audio/transcriptions", "post"),
]


@pytest.mark.parametrize(("path", "method"), UPLOADS, ids=[p for p, _ in UPLOADS])
def test_every_upload_documents_507_storage_full_in_the_error_shape(
    client: TestClient, path: str, method: str
) -> None:
    responses = client.get("/openapi.json").json()["paths"][path][method]["responses"]
    full = responses["507"]
    assert full["content"] == {
        "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
    }
    assert "`storage_full`" in full["description"]
    assert "`storage_unavailable`" in responses["503"]["description"]


def test_every_code_an_operation_names_is_answered_with_that_status(client: TestClient) -> None:
    """A code word in a response's description is one the API answers with that status, by
    the declaration docs/http.md's error table is held to."""
    spec = client.get("/openapi.json").json()
    declared = {code.value: code.status for code in ErrorCode}
    named = 0
    for path, item in spec["paths"].items():
        for method, op in item.items():
            for status, response in op["responses"].items():
                for word in re.findall(r"`([a-z_]+)`", response.get("description", "")):
                    if word in declared:
                        named += 1
                        assert str(declared[word]) == status, (method, path, word)
    assert named >= 3 * 4  # the uploads' 408, 413, 429, 503 and 507 at least
