"""D11: each domain is declared once; runtime lanes, CLI progress and API enums derive from it."""

from __future__ import annotations

import subprocess
import sys
from typing import get_args

import pytest

from conveyor.api.schemas import AudioStage, MediaStage
from conveyor.audio.stages import AUDIO
from conveyor.config import MediaSettings, PipelineSettings, Settings
from conveyor.errors import DeclarationError
from conveyor.halts import known
from conveyor.media.domain import MEDIA
from conveyor.pipeline import Advance, Declaration, Lane, Stage
from conveyor.runtime import DECLARATIONS, Runtime, halt_reasons


def test_d11_api_stage_enums_are_the_declared_stages() -> None:
    assert get_args(AudioStage) == AUDIO.stage_names
    assert get_args(MediaStage) == MEDIA.stage_names


def test_d11_runtime_lanes_come_from_the_declared_lanes_and_their_settings_keys() -> None:
    settings = Settings(
        pipeline=PipelineSettings(workers=3),
        media=MediaSettings(short_workers=4, long_workers=0),
    )
    lanes = Runtime(settings).lanes()
    assert lanes == {"audio": 3, "short": 4, "long": 0}
    declared = {lane.name for d in DECLARATIONS for lane in d.lanes}
    assert set(lanes) == declared


def test_d11_a_declared_stage_without_a_step_or_lane_fails_at_start_up() -> None:
    declaration = Declaration(
        name="x",
        table=AUDIO.table,
        stages=[Stage("a", lane="l"), Stage("b", lane="l"), Stage("end")],
        lanes=[Lane("l", lambda s: s.pipeline.workers)],
        order_by=[AUDIO.table.c.id],
        owned_fields=frozenset(),
    )
    with pytest.raises(DeclarationError, match="'b' has no step"):
        declaration.bind({"a": lambda ctx: Advance()})
    domain = declaration.bind({"a": lambda ctx: Advance(), "b": lambda ctx: Advance()})
    assert [s.name for s in domain.stages if not s.terminal] == ["a", "b"]
    with pytest.raises(DeclarationError, match="undeclared lane"):
        Declaration(
            "y", AUDIO.table, [Stage("a", lane="nowhere"), Stage("end")], [], [], frozenset()
        )


def test_d11_every_declared_halt_reason_has_plain_words_on_the_web() -> None:
    """The pages say why in words for every reason a domain or the engine declares, never the
    bare code (the fallback is for reasons of a newer version only)."""
    from conveyor.web.words import halt_words

    for owner in halt_reasons():
        for member in owner:
            assert halt_words(member.value) == member.words
    assert halt_words("from_a_newer_version") == "It was stopped (from a newer version)."


def test_d11_each_domain_reads_its_own_way_forward_for_a_shared_reason() -> None:
    media = known("undecodable", MEDIA.halt_reasons)
    audio = known("undecodable", AUDIO.halt_reasons)
    assert audio is not None and media is not None and audio is not media
    assert "--raw-pcm" in audio.action and "--raw-pcm" not in media.action
    assert known("stuck", MEDIA.halt_reasons) is known("stuck", AUDIO.halt_reasons)


def test_every_provider_setting_names_a_backend_and_every_backend_a_setting() -> None:
    """``[transcription] provider`` takes exactly the names of the provider registry: one
    module per name in ``providers/backends/``, each with its ``BACKEND``."""
    from conveyor.config import TranscriptionSettings
    from conveyor.errors import ConfigError
    from conveyor.providers.registry import ProviderBackend, backend_for, names

    assert {"local", "openai", "speechkit"} <= set(names())
    for name in names():
        backend = backend_for(TranscriptionSettings(provider=name))
        assert isinstance(backend, ProviderBackend)
    with pytest.raises(
        ConfigError, match=f"'whisper' is not a provider; use one of {', '.join(names())}$"
    ):
        backend_for(TranscriptionSettings(provider="whisper"))


def test_every_store_backend_is_a_module_of_its_scheme() -> None:
    from conveyor.objects.factory import backends

    assert {"file", "s3"} <= set(backends())


def test_d11_every_declared_stage_has_plain_words_on_the_web() -> None:
    from conveyor.web.words import stage_words

    for declaration in DECLARATIONS:
        for stage in declaration.stages:
            assert stage.words, f"{declaration.name} stage {stage.name} has no words"
            assert stage_words(declaration.name, stage.name) == stage.words


def test_d11_a_recordings_activity_says_what_its_declared_stage_says() -> None:
    """The activity list's words for a step that moved a record on, or postponed it, are its
    stage's declared ``advanced_words`` and ``postponed_words``: a declaration that says other
    words at the audio domain's stage names is read as it says them (a second table of words
    by stage name fails here), and a stage without them has the general words."""
    from conveyor.web.words import event_words

    said = {s.name: event_words(AUDIO, s.name, "advanced") for s in AUDIO.stages[:-1]}
    assert said == {
        "uploaded": "prepared for speech recognition",
        "normalized": "sent to speech recognition",
        "submitted": "speech recognised",
        "transcribed": "transcript written",
    }
    assert event_words(AUDIO, "submitted", "postponed") == "still being recognised"
    assert event_words(AUDIO, "normalized", "postponed") == "waiting a little"
    assert (
        event_words(AUDIO, "from_a_newer_version", "advanced")
        == "moved on from from_a_newer_version"
    )

    other = Declaration(
        name="other",
        table=AUDIO.table,
        stages=[
            Stage("uploaded", lane="l", advanced_words="looked at"),
            Stage("submitted", lane="l", postponed_words="asked again later"),
            Stage("done"),
        ],
        lanes=[Lane("l", lambda s: s.pipeline.workers)],
        order_by=[AUDIO.table.c.id],
        owned_fields=frozenset(),
    )
    assert event_words(other, "uploaded", "advanced") == "looked at"
    assert event_words(other, "submitted", "advanced") == "moved on from submitted"
    assert event_words(other, "submitted", "postponed") == "asked again later"
    assert event_words(other, "uploaded", "postponed") == "waiting a little"
    assert event_words(other, "uploaded", "failed") == "a try failed; it will be tried again"


@pytest.mark.parametrize("name", ["openai", "speechkit"])
def test_a_provider_backend_imports_without_the_settings_which_take_its_own_model(
    name: str,
) -> None:
    """A backend module's ``SETTINGS`` subclasses :mod:`conveyor.provider_settings`' model, so
    the module imports without the settings (no cycle with ``conveyor.config``, which imports
    the backends), and the settings imported after it take that very model as its section.
    In a fresh interpreter, so that nothing has imported either yet."""
    code = f"""
import sys
import conveyor.providers.backends.{name} as backend
assert "conveyor.config" not in sys.modules, "the backend imported the settings"
from conveyor import config, provider_settings
assert config.provider_sections()["{name}"] is backend.SETTINGS
assert config.TranscriptionSettings.model_fields["{name}"].annotation is backend.SETTINGS
assert config.ProviderSettings is provider_settings.ProviderSettings
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
