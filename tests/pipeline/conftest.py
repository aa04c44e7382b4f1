from __future__ import annotations

import pytest
from sqlalchemy import Engine

from conveyor.config import PipelineSettings
from tests.support.jobs_domain import create_tables


@pytest.fixture
def db(engine: Engine) -> Engine:
    """The migrated database plus the engine-test tables."""
    create_tables(engine)
    return engine


@pytest.fixture
def settings() -> PipelineSettings:
    return PipelineSettings(
        workers=2,
        own_work_limit=3600,
        foreign_work_limit=86400,
        max_attempts=3,
        retry_base=2.0,
        retry_max=60.0,
        poll_interval=0.05,
        stop_grace=5.0,
    )
