"""D11: each domain is declared once; runtime lanes, CLI progress and API enums derive from it."""

from __future__ import annotations

from typing import get_args

import pytest

from conveyor.api.schemas import AudioStage, MediaStage
from conveyor.audio.stages import AUDIO
from conveyor.config import MediaSettings, PipelineSettings, Settings
from conveyor.errors import DeclarationError
from conveyor.media.domain import MEDIA
from conveyor.pipeline import Advance, Declaration, Lane, Stage
from conveyor.runtime import DECLARATIONS, Runtime


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
        lanes=[Lane("l", "pipeline.workers")],
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
