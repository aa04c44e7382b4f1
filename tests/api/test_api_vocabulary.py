"""An owner's standing vocabulary over HTTP (issue 9 §5): read, set, removed, per owner only; and
a recording's channel choice at upload, kept on its card."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.api import Api
from tests.support.multipart_body import multipart


def test_vocabulary_is_each_owners_own(api: Api, client: TestClient) -> None:
    assert client.get("/api/vocabulary", headers=api.alice).json() == {"hints": None}
    put = client.put(
        "/api/vocabulary", json={"hints": " Kubernetes,\n Anya Petrova "}, headers=api.alice
    )
    assert put.status_code == 200, put.text
    assert put.json() == {"hints": "Kubernetes, Anya Petrova"}
    assert client.get("/api/vocabulary", headers=api.alice).json() == put.json()
    # Another owner sees and changes only their own.
    assert client.get("/api/vocabulary", headers=api.bob).json() == {"hints": None}
    assert client.delete("/api/vocabulary", headers=api.bob).status_code == 204
    assert client.get("/api/vocabulary", headers=api.alice).json() == put.json()
    # Refused with nothing changed: too long, unknown fields, no token.
    too_long = client.put("/api/vocabulary", json={"hints": "x" * 1001}, headers=api.alice)
    assert too_long.status_code == 422
    extra = client.put("/api/vocabulary", json={"hints": "a", "owner": "bob"}, headers=api.alice)
    assert extra.status_code == 422
    assert client.get("/api/vocabulary").status_code == 401
    assert client.get("/api/vocabulary", headers=api.alice).json() == put.json()
    # Empty text and null both remove it; a delete is idempotent.
    assert client.put("/api/vocabulary", json={"hints": "  "}, headers=api.alice).json() == {
        "hints": None
    }
    client.put("/api/vocabulary", json={"hints": "Grafana"}, headers=api.alice)
    assert client.put("/api/vocabulary", json={"hints": None}, headers=api.alice).json() == {
        "hints": None
    }
    assert client.delete("/api/vocabulary", headers=api.alice).status_code == 204
    assert client.get("/api/vocabulary", headers=api.alice).json() == {"hints": None}


@pytest.mark.parametrize("how", ["form", "query"])
def test_a_recordings_channel_choice_is_kept_on_its_card(
    api: Api, client: TestClient, wav: bytes, how: str
) -> None:
    def upload(channels: str | None) -> Any:
        if how == "form":
            parts = [("channels", None, channels.encode())] if channels else []
            body, kind = multipart(*parts, ("file", "a.wav", wav))
            return client.post(
                "/api/records?keep_duplicate=true",
                content=body,
                headers={**api.alice, "Content-Type": kind},
            )
        return client.post(
            "/api/records",
            params={"channels": channels, "keep_duplicate": "true"}
            if channels
            else {"keep_duplicate": "true"},
            content=wav,
            headers={**api.alice, "Content-Type": "application/octet-stream"},
        )

    separate, default = upload("separate"), upload(None)
    assert separate.status_code == 201 and default.status_code == 201
    assert separate.json()["channels"] == "separate"
    # No choice: the installation's [transcription] channels, written on the record.
    assert default.json()["channels"] == "mix"
    wrong = upload("both")
    assert wrong.status_code == 422, wrong.text
