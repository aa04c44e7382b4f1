"""The order of intake's refusals: what is wrong with a file as given comes before "already
there" (both databases, a local file and a stream).

A WAV sent with ``raw_pcm`` is refused as not headerless PCM even when its owner already holds
the same bytes as a record: the duplicate would tell them nothing about the option they got
wrong, and the rerun without it is then told it is already there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from conveyor.audio.intake import accept_audio
from conveyor.config import Settings
from conveyor.error_codes import ErrorCode
from conveyor.errors import Duplicate, RejectedInput, UnsupportedMedia
from conveyor.runtime import Runtime
from tests.support.stored import object_keys


def _chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as file:
        while chunk := file.read(65536):
            yield chunk


@pytest.mark.parametrize("as_stream", [False, True], ids=["file", "stream"])
def test_a_format_refusal_comes_before_already_there(
    engine: Engine, tmp_path: Path, corpus: Path, as_stream: bool
) -> None:
    runtime = Runtime(Settings(storage={"root": tmp_path / "data"}), engine=engine)  # type: ignore[arg-type]
    jfk = corpus / "audio" / "jfk.wav"

    def add(source: Path, *, raw_pcm: bool = False) -> int:
        return accept_audio(
            engine,
            runtime.store,
            runtime.clock,
            _chunks(source) if as_stream else source,
            owner="ann",
            original_name=source.name,
            strict=True,
            raw_pcm=raw_pcm,
        )

    held = add(jfk)
    stored = object_keys(runtime.store)
    with pytest.raises(UnsupportedMedia) as refused:
        add(jfk, raw_pcm=True)
    assert refused.value.reason == ErrorCode.NOT_MEDIA
    assert "this file is WAV audio, not headerless PCM" in str(refused.value)
    with pytest.raises(Duplicate) as again:  # the same file as it is: already there
        add(jfk)
    assert again.value.existing_id == held
    empty = tmp_path / "empty.wav"
    empty.write_bytes(b"")
    with pytest.raises(RejectedInput) as nothing:
        add(empty, raw_pcm=True)
    assert nothing.value.reason == ErrorCode.EMPTY_FILE
    assert object_keys(runtime.store) == stored  # no refusal left anything behind
