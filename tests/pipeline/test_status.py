"""A record's state is computed once (``status_of``) for the pages and the CLI, from its queue
columns at one instant (P11, D6)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from sqlalchemy import RowMapping

from conveyor.audio.stages import AUDIO
from conveyor.media.stages import MEDIA
from conveyor.pipeline.status import RecordState, status_of

NOW = 1_000.0


def row(**values: Any) -> RowMapping:
    base = {
        "stage": "normalized",
        "halted_at": None,
        "claim_token": None,
        "claim_expires_at": None,
        "retry_at": None,
        "attempts": 0,
    }
    return cast(RowMapping, {**base, **values})


@pytest.mark.parametrize(
    ("values", "state"),
    [
        ({}, RecordState.WAITING),
        ({"claim_token": "t", "claim_expires_at": NOW + 5}, RecordState.WORKING),
        ({"claim_token": "t", "claim_expires_at": NOW - 5}, RecordState.WAITING),  # lapsed
        ({"retry_at": NOW + 30, "attempts": 2}, RecordState.RETRYING),
        ({"retry_at": NOW - 1, "attempts": 2}, RecordState.WAITING),  # due again
        ({"stage": "done"}, RecordState.DONE),
        ({"stage": "done", "halted_at": NOW}, RecordState.HALTED),
        ({"halted_at": NOW, "claim_token": "t", "claim_expires_at": NOW + 5}, RecordState.HALTED),
    ],
)
def test_each_record_is_in_exactly_one_state(values: dict[str, Any], state: RecordState) -> None:
    assert status_of(row(**values), AUDIO, NOW).state is state


def test_a_postpone_is_a_retry_without_failed_attempts() -> None:
    postponed = status_of(row(retry_at=NOW + 9), AUDIO, NOW)
    failed = status_of(row(retry_at=NOW + 9, attempts=1), AUDIO, NOW)
    assert postponed.postponed and not failed.postponed
    assert postponed.retry_at == failed.retry_at == NOW + 9


def test_the_terminal_stage_is_the_declarations() -> None:
    assert status_of(row(stage="done", halted_at=NOW), MEDIA, NOW).terminal
    assert not status_of(row(stage="transcoding"), MEDIA, NOW).terminal
