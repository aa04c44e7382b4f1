"""The ``openai`` provider against a real OpenAI-compatible server, not one of ours:
faster-whisper-server (PyPI ``faster-whisper-server``, MIT), run on loopback with the bundled
``base`` model, through the whole audio pipeline on SQLite and PostgreSQL.

What our loopback servers cannot show: that a real implementation of
``POST /v1/audio/transcriptions`` decodes the Ogg Opus we send, answers the ``verbose_json`` we
parse (segments with Whisper's own fields), and takes our ``prompt`` and ``language``. Its quirk:
it reads the model from a ``model_name`` form field, not OpenAI's ``model``, so it serves the
``whisper-1`` entry of its config whatever we ask for.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jiwer
import pytest
from sqlalchemy import Engine

from conveyor.audio.cards import transcript_of
from conveyor.audio.vocabulary import set_owner_vocabulary
from conveyor.providers.backends.openai import OpenAISettings
from conveyor.providers.local import whisper_languages
from conveyor.providers.openai_compatible import OpenAICompatibleProvider
from conveyor.providers.whisper_model import resolve_model
from conveyor.runtime import default_model_cache
from conveyor.testing import FakeClock
from tests.support.needs import need
from tests.support.remote import attempts, drive, ingest, make_runtime
from tests.support.servers import free_port

JFK = (
    "and so my fellow americans ask not what your country can do for you "
    "ask what you can do for your country"
)


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    need(
        importlib.util.find_spec("faster_whisper_server") is not None,
        "the faster-whisper-server package (a dev dependency: scripts/install dev)",
    )
    folder = tmp_path_factory.mktemp("fws")
    model = resolve_model("base", default_model_cache())
    config = folder / "models.yaml"
    config.write_text(
        "models:\n"
        "  - name: whisper-1\n"
        f"    path: {model}\n"
        "    model_options: {device: cpu, compute_type: int8, cpu_threads: 2}\n"
        "    transcribe_options: {beam_size: 5, vad_filter: true}\n"
    )
    port = free_port()
    log = (folder / "server.log").open("wb")
    child = subprocess.Popen(
        [sys.executable, "-m", "faster_whisper_server", "--config", str(config),
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if child.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    "faster-whisper-server did not start: "
                    + (folder / "server.log").read_text(errors="replace")[-2000:]
                )
            time.sleep(0.2)
        yield url
    finally:
        child.terminate()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        log.close()


def test_a_real_openai_compatible_server_transcribes_through_the_pipeline(
    engine: Engine, tmp_path: Path, corpus: Path, server_url: str
) -> None:
    clock = FakeClock()
    settings = OpenAISettings(base_url=server_url + "/v1", model="whisper-1", timeout=300.0)
    provider = OpenAICompatibleProvider(settings, whisper_languages(), tmp_path / "openai")
    runtime = make_runtime(engine, tmp_path, provider, clock)
    set_owner_vocabulary(engine, clock, "ann", "Kennedy")
    rid = ingest(runtime, corpus / "audio" / "jfk.wav", hints="fellow Americans")
    row, _ = drive(runtime, clock, rid)
    assert row["stage"] == "done", dict(row)
    assert row["detected_language"] == "en" and row["no_speech"] is False
    with runtime.engine.connect() as conn:
        text = transcript_of(conn, rid)
    assert text is not None
    words = jiwer.RemovePunctuation()(text["body"].lower())  # type: ignore[no-untyped-call]
    assert jiwer.wer(JFK, " ".join(words.split())) < 0.15, text["body"]
    segments = text["segments"]
    assert segments and segments[0]["start"] < 1.0 and 9.0 < segments[-1]["end"] <= 11.5
    (attempt,) = attempts(runtime, rid)
    assert attempt["state"] == "done" and attempt["source_url"] == "inline"
