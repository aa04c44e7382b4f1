"""``POST /v1/audio/transcriptions`` and ``GET /v1/models`` served by Conveyor, driven by the
official ``openai`` Python package against a real server on loopback, with the real local
recognizer, on SQLite and PostgreSQL.

The request makes a record like any upload (the owner's, with the prompt as its hints), waits
for it and answers in every ``response_format``; a record not done within
``[api] transcription_wait`` is answered 504 with its id and address, and goes on; tokens and
owners are the API's own.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import httpx
import openai
import pytest
from fastapi import FastAPI

from conveyor.audio import queries
from tests.support.api import LiveServer, MakeApi
from tests.support.needs import AUDIO_CORPUS, need_corpus

MODEL_CACHE = Path(tempfile.gettempdir()) / "conveyor-test-models"
JFK = (
    "And so my fellow Americans, ask not what your country can do for you, "
    "ask what you can do for your country."
)


def sdk(server: LiveServer, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=token, max_retries=0, timeout=300)


def token_of(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


def test_the_official_client_transcribes_through_the_pipeline(
    make_api: MakeApi, live: Callable[[FastAPI], LiveServer]
) -> None:
    need_corpus(AUDIO_CORPUS)
    api = make_api(
        run_workers=True,
        pipeline={"workers": 1},
        transcription={"model_cache": MODEL_CACHE, "threads": 2},
    )
    jfk = AUDIO_CORPUS / "jfk.wav"
    with live(api.app) as server:
        client = sdk(server, token_of(api.alice))
        assert {m.id for m in client.models.list()} == {"whisper-1", "base"}
        with jfk.open("rb") as audio:
            verbose = client.audio.transcriptions.create(
                file=audio,
                model="whisper-1",
                language="EN",
                prompt="Americans",
                response_format="verbose_json",
                timestamp_granularities=["word", "segment"],
            )
        assert verbose.text == JFK
        assert verbose.language == "en"
        assert verbose.segments and verbose.words
        assert [w.word for w in verbose.words][:4] == ["And", "so", "my", "fellow"]
        assert verbose.segments[0].start == verbose.words[0].start
        assert abs(verbose.words[0].start - 0.3) < 0.25  # jfk.wav's speech begins at 0.3 s
        for segment in verbose.segments:
            assert segment.end > segment.start
        # The record is the owner's like any upload: its prompt is its hints.
        with api.runtime.engine.connect() as conn:
            (card,) = queries.list_records(conn, owner="alice")
        assert card["title"] == "jfk.wav"
        with httpx.Client(base_url=server.url, headers=api.alice) as plain:
            shown = plain.get(f"/api/records/{card['id']}").json()
            assert shown["hints"] == "Americans" and shown["stage"] == "done"
        with httpx.Client(base_url=server.url, headers=api.bob) as other:
            assert other.get(f"/api/records/{card['id']}").status_code == 404

        # Every other format, on a short clip (the recognizer is warm).
        short = AUDIO_CORPUS / "sense_and_sensibility_0880.wav"
        with short.open("rb") as audio:
            as_json = client.audio.transcriptions.create(file=audio, model="base")
        assert "ill-disposed young man" in as_json.text
        with short.open("rb") as audio:
            as_text = client.audio.transcriptions.create(
                file=audio, model="base", response_format="text"
            )
        assert isinstance(as_text, str) and "young man" in as_text
        with short.open("rb") as audio:
            as_srt = client.audio.transcriptions.create(
                file=audio, model="base", response_format="srt"
            )
        assert re.match(r"1\n00:00:00,\d{3} --> 00:00:0\d,\d{3}\nHe was", str(as_srt)), as_srt
        with short.open("rb") as audio:
            as_vtt = client.audio.transcriptions.create(
                file=audio, model="base", response_format="vtt"
            )
        assert str(as_vtt).startswith("WEBVTT\n\n00:00:00.")
        with short.open("rb") as audio:
            words_only = client.audio.transcriptions.create(
                file=audio,
                model="base",
                response_format="verbose_json",
                timestamp_granularities=["word"],
            )
        assert words_only.words and not words_only.segments


def test_a_slow_record_is_504_with_its_address_and_goes_on(
    make_api: MakeApi, live: Callable[[FastAPI], LiveServer]
) -> None:
    """No workers here: the record waits at ``uploaded``; the answer names it, the client is
    told not to retry (nothing would be gained but a second record), and the record is kept."""
    need_corpus(AUDIO_CORPUS)
    api = make_api(api={"transcription_wait": 0.5})
    with live(api.app) as server:
        client = sdk(server, token_of(api.alice))
        with (
            (AUDIO_CORPUS / "jfk.wav").open("rb") as audio,
            pytest.raises(openai.APIStatusError) as caught,
        ):
            client.audio.transcriptions.create(file=audio, model="whisper-1")
        answer = caught.value.response
        assert answer.status_code == 504
        assert answer.headers["x-should-retry"] == "false"
        record = answer.headers["Location"]
        assert re.fullmatch(r"/api/records/\d+", record)
        assert caught.value.body is not None and "still being transcribed" in str(
            caught.value.message
        )
        with httpx.Client(base_url=server.url, headers=api.alice) as plain:
            assert plain.get(record).json()["stage"] == "uploaded"
        with api.runtime.engine.connect() as conn:
            assert len(queries.list_records(conn, owner="alice")) == 1


def test_tokens_and_fields_are_checked(
    make_api: MakeApi, live: Callable[[FastAPI], LiveServer]
) -> None:
    need_corpus(AUDIO_CORPUS)
    api = make_api(api={"transcription_wait": 0.5})
    with live(api.app) as server:
        with pytest.raises(openai.AuthenticationError):
            sdk(server, "not-a-token").models.list()
        client = sdk(server, token_of(api.alice))
        clip = AUDIO_CORPUS / "jfk.wav"
        with clip.open("rb") as audio, pytest.raises(openai.BadRequestError) as caught:
            client.audio.transcriptions.create(
                file=audio,
                model="whisper-1",
                response_format="diarized_json",
            )
        assert "response_format" in str(caught.value.message)
        with clip.open("rb") as audio, pytest.raises(openai.APIStatusError) as refused:
            client.audio.transcriptions.create(file=audio, model="whisper-1", prompt="x" * 1001)
        assert refused.value.status_code == 400 and "prompt" in str(refused.value.message)
        with api.runtime.engine.connect() as conn:
            assert queries.list_records(conn, owner="alice") == []
