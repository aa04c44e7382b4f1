"""Vocabulary hints per owner (a standing vocabulary) and per record, merged for the recognizer,
and each record's choice of per-channel recognition (issue 9 §5); every engine test on SQLite and
PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from conveyor.audio import queries
from conveyor.audio.intake import accept_audio
from conveyor.audio.vocabulary import merge_hints, owner_vocabulary, set_owner_vocabulary
from conveyor.config import Settings
from conveyor.errors import RejectedInput
from conveyor.pipeline import Executor
from conveyor.runtime import Runtime
from conveyor.testing import FakeClock, FakeProvider


def test_merge_puts_the_owners_terms_first_and_gives_each_term_once() -> None:
    assert merge_hints(None, None) is None
    assert merge_hints("", "  ") is None
    assert merge_hints("Kubernetes, Anya Petrova", None) == "Kubernetes, Anya Petrova"
    assert merge_hints(None, "Kennedy") == "Kennedy"
    # The record's terms last (Whisper keeps a long prompt's end); a repeated term once, at its
    # last place, whatever its case.
    assert (
        merge_hints("Kubernetes; anya petrova\nGrafana", "Anya Petrova, Kennedy")
        == "Kubernetes, Grafana, Anya Petrova, Kennedy"
    )


def test_an_owners_vocabulary_is_set_replaced_and_removed(engine: Engine, clock: FakeClock) -> None:
    # Whitespace, line breaks included, is collapsed.
    assert set_owner_vocabulary(engine, clock, "ann", "  Kubernetes,\n  Grafana ") == (
        "Kubernetes, Grafana"
    )
    assert (
        set_owner_vocabulary(engine, clock, "ann", "Kubernetes, Grafana") == "Kubernetes, Grafana"
    )
    assert set_owner_vocabulary(engine, clock, "bob", "Sorensen") == "Sorensen"
    with engine.connect() as conn:
        assert owner_vocabulary(conn, "ann") == "Kubernetes, Grafana"
        assert owner_vocabulary(conn, "bob") == "Sorensen"
    with pytest.raises(RejectedInput) as refused:
        set_owner_vocabulary(engine, clock, "ann", "x" * 1001)
    assert refused.value.reason == "bad_hints"
    assert set_owner_vocabulary(engine, clock, "ann", "   ") is None
    with engine.connect() as conn:
        assert owner_vocabulary(conn, "ann") is None
        assert owner_vocabulary(conn, "bob") == "Sorensen"


def _run(runtime: Runtime, clock: FakeClock, rid: int) -> None:
    executor: Executor = runtime.pool({}).executor
    for _ in range(20):
        if not executor.run_once(runtime.audio, "audio"):
            clock.advance(1.0)


def test_every_recording_of_the_owner_gets_the_vocabulary_merged_with_its_own_hints(
    engine: Engine, tmp_path: Path, corpus: Path, clock: FakeClock
) -> None:
    provider = FakeProvider()
    settings = Settings(storage={"root": tmp_path / "data"}, pipeline={"workers": 1})  # type: ignore[arg-type]
    runtime = Runtime(settings, clock, engine=engine, provider=provider)
    set_owner_vocabulary(engine, clock, "ann", "Kubernetes, Anya Petrova")
    audio = corpus / "audio" / "jfk.wav"

    def ingest(owner: str, hints: str | None = None) -> int:
        return accept_audio(
            engine, runtime.store, clock, audio, owner=owner, hints=hints, keep_duplicate=True
        )

    with_own = ingest("ann", "Kennedy, anya petrova")
    plain = ingest("ann")
    other = ingest("bob", "Sorensen")
    # Set after upload, before recognition: it applies to recordings still waiting.
    set_owner_vocabulary(engine, clock, "bob", "Grafana")
    for rid in (with_own, plain, other):
        _run(runtime, clock, rid)
    hints = [provider.requests[key].hints for key in provider.submits]
    by_record = dict(zip((with_own, plain, other), hints, strict=True))
    assert by_record == {
        with_own: "Kubernetes, Kennedy, anya petrova",
        plain: "Kubernetes, Anya Petrova",
        other: "Grafana, Sorensen",
    }


class ChannelHearingProvider(FakeProvider):
    """A fake that, like the local recognizer, takes channels apart."""

    hears_channels_apart = True


@pytest.mark.parametrize("default", ["mix", "separate"])
def test_each_recordings_channel_choice_overrides_the_default(
    engine: Engine, tmp_path: Path, corpus: Path, clock: FakeClock, default: str
) -> None:
    provider = ChannelHearingProvider()
    settings = Settings(
        storage={"root": tmp_path / "data"},  # type: ignore[arg-type]
        pipeline={"workers": 1},  # type: ignore[arg-type]
        transcription={"channels": default},  # type: ignore[arg-type]
    )
    runtime = Runtime(settings, clock, engine=engine, provider=provider)
    stereo = corpus / "audio" / "stereo_two_speakers.wav"
    # None: a record from before the choice existed follows [transcription] channels.
    choices = ["separate", "mix", None]
    ids = [
        accept_audio(
            engine, runtime.store, clock, stereo, owner="ann", channels=c, keep_duplicate=True
        )
        for c in choices
    ]
    _run(runtime, clock, ids[0])
    heard = [provider.requests[key].channels for key in provider.submits]
    assert heard == [2, 1, 2 if default == "separate" else 1]
    with engine.connect() as conn:
        notes = [
            " ".join(str(e["outcome_text"]) for e in queries.events_of(conn, rid)) for rid in ids
        ]
    assert "2 channels kept apart" in notes[0] and "kept apart" not in notes[1]


def test_a_separate_choice_a_provider_cannot_honour_is_said_on_the_record(
    engine: Engine, tmp_path: Path, corpus: Path, clock: FakeClock
) -> None:
    provider = FakeProvider()  # hears one mix only, like SpeechKit and OpenAI-compatible servers
    settings = Settings(storage={"root": tmp_path / "data"}, pipeline={"workers": 1})  # type: ignore[arg-type]
    runtime = Runtime(settings, clock, engine=engine, provider=provider)
    stereo = corpus / "audio" / "stereo_two_speakers.wav"
    rid = accept_audio(
        engine, runtime.store, clock, stereo, owner="ann", channels="separate", keep_duplicate=True
    )
    _run(runtime, clock, rid)
    assert [provider.requests[key].channels for key in provider.submits] == [1]
    with engine.connect() as conn:
        notes = " ".join(str(e["outcome_text"]) for e in queries.events_of(conn, rid))
    assert "channels mixed: fake recognises one mix only" in notes


def test_a_truncated_m4a_is_transcribed_from_its_decoded_part_and_its_history_says_so(
    engine: Engine, tmp_path: Path, corpus: Path, clock: FakeClock
) -> None:
    provider = FakeProvider()
    settings = Settings(storage={"root": tmp_path / "data"}, pipeline={"workers": 1})  # type: ignore[arg-type]
    runtime = Runtime(settings, clock, engine=engine, provider=provider)
    data = (corpus / "audio" / "jfk.m4a").read_bytes()
    cut = tmp_path / "cut.m4a"
    cut.write_bytes(data[: len(data) * 6 // 10])  # moov is at the front: the samples end early
    rid = accept_audio(engine, runtime.store, clock, cut, owner="ann")
    _run(runtime, clock, rid)
    with engine.connect() as conn:
        row = queries.record_by_id(conn, rid)
        notes = " ".join(str(e["outcome_text"]) for e in queries.events_of(conn, rid))
    assert row is not None and row["stage"] == "done"
    assert "damaged or truncated: decoding stopped after 6.69 s of the 11.05 s" in notes, notes
    assert "the decoded part is kept" in notes
