"""The record card says why a record waits on an unreachable provider (``provider_wait``): its
words, the tries since the record entered its stage, the next try; in the card, the list and
the journal (one ``postponed`` row per wait, not per try). SQLite and PostgreSQL."""

from __future__ import annotations

import re
import time
from pathlib import Path

from fastapi.testclient import TestClient

from tests.support.api import MakeApi
from tests.support.servers import free_port


def test_the_card_says_what_the_unreachable_provider_said_the_tries_and_the_next_try(
    make_api: MakeApi, corpus: Path
) -> None:
    api = make_api(
        run_workers=True,
        pipeline={"workers": 1, "retry_base": 0.2, "retry_max": 0.4},
        transcription={
            "provider": "openai",
            "openai": {"base_url": f"http://127.0.0.1:{free_port()}/v1"},
        },
    )
    data = (corpus / "audio" / "LDC93S1.flac").read_bytes()
    with TestClient(api.app) as client:
        created = client.post(
            "/api/records?name=LDC93S1.flac", content=data, headers=api.alice
        ).json()
        assert created["provider_wait"] is None  # just uploaded: nothing asked yet
        link = created["links"]["self"]
        card = created
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            card = client.get(link, headers=api.alice).json()
            if card["provider_wait"] is not None and card["provider_wait"]["tries"] >= 3:
                break
            time.sleep(0.2)
        wait = card["provider_wait"]
        assert wait is not None, card
        assert card["stage"] == "normalized" and card["halted"] is False
        assert card["attempts"] == 0  # waiting is not failing (D6)
        assert wait["provider"] == "openai" and wait["tries"] >= 3
        assert re.fullmatch(r"openai is unreachable \(ConnectError: .+\)", wait["error"]), wait
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", wait["next_try_at"])
        listed = client.get("/api/records", headers=api.alice).json()["items"]
        assert listed[0]["provider_wait"]["error"] == wait["error"]
        events = client.get(created["links"]["events"], headers=api.alice).json()
        postponed = [e for e in events if e["outcome"] == "postponed"]
        assert len(postponed) == 1, events  # the first refusal of the run, not every try
        assert postponed[0]["stage"] == "normalized" and postponed[0]["origin"] == "pipeline"
        assert "openai is unreachable" in postponed[0]["outcome_text"]
        # Another owner learns nothing of it.
        assert client.get(link, headers=api.bob).status_code == 404
