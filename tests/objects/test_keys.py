"""The object key layout is declared once: every domain's keys sit in the folders the sweep
and the storage check read."""

from __future__ import annotations

import pytest

from conveyor.audio.stages import AUDIO, AUDIO_KEYS
from conveyor.media.stages import MEDIA, MEDIA_KEYS
from conveyor.objects import check_key
from conveyor.objects.keys import OBJECT_PREFIXES, KeyLayout


@pytest.mark.parametrize(("layout", "name"), [(AUDIO_KEYS, AUDIO.name), (MEDIA_KEYS, MEDIA.name)])
def test_each_domain_stores_under_folders_the_sweep_reads(layout: KeyLayout, name: str) -> None:
    upload, produced = layout.upload(), layout.produced(7, "normalized-ab.wav")
    assert upload.startswith(f"uploads/{name}/") and check_key(upload) == upload
    assert produced == f"{name}/7/normalized-ab.wav"
    assert produced.startswith(layout.record(7) + "/")
    assert {upload.split("/")[0], produced.split("/")[0]} <= set(OBJECT_PREFIXES)
    assert layout.upload() != upload  # fresh each time


def test_a_domain_without_a_swept_folder_is_refused() -> None:
    with pytest.raises(ValueError, match="no object folder"):
        KeyLayout("documents")
