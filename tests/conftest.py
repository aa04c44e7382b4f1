"""Shared fixtures: every engine test runs on SQLite and on PostgreSQL through ``engine``.

PostgreSQL is ``CONVEYOR_TEST_POSTGRES_URL`` (default the local ``test`` database). Without a
reachable server the PostgreSQL half is skipped locally; under ``CI=true`` that is a failure
(``needs.need``), and so is every other skip: under CI nothing may skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, MetaData, text
from sqlalchemy.engine import make_url

from conveyor.config import StorageSettings
from conveyor.db import outage
from conveyor.db.engine import make_engine
from conveyor.db.migrate import upgrade
from conveyor.db.tables import metadata
from conveyor.objects import ObjectStore, open_store
from conveyor.testing import FakeClock
from tests.support.needs import AUDIO_CORPUS, CORPUS, in_ci, need, need_corpus
from tests.support.s3server import PART, S3Server, start_s3_server
from tests.support.tcp_proxy import TcpProxy

# Warm local recognizers outlive the test that started them; make them leave soon after.
os.environ.setdefault("CONVEYOR_TRANSCRIPTION__IDLE_EXIT", "10")

PG_URL = os.environ.get("CONVEYOR_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
_pg_ready: bool | None = None


def _reset_postgres(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    upgrade(engine)


def _truncate(engine: Engine, extra: MetaData | None = None) -> None:
    names = [t.name for t in metadata.sorted_tables]
    if extra is not None:
        names += [t.name for t in extra.sorted_tables]
    with engine.begin() as conn:
        present = {
            r[0]
            for r in conn.execute(
                text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
            )
        }
        wanted = [n for n in names if n in present]
        if wanted:
            conn.execute(text(f"TRUNCATE {', '.join(wanted)} RESTART IDENTITY CASCADE"))


@pytest.fixture(scope="session")
def pg_engine() -> Iterator[Engine]:
    """A migrated PostgreSQL engine for the session, or a skip (a failure under CI=true)."""
    engine = make_engine(PG_URL, pool_size=20)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        engine.dispose()
        need(False, f"PostgreSQL at {PG_URL} (unreachable: {exc})")
    _reset_postgres(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def pg_proxy(pg_engine: Engine) -> Iterator[TcpProxy]:
    """A TCP proxy in front of the suite's PostgreSQL, to take the database away and bring it
    back (``down``, ``up``, ``cut``); the process's outage state is fresh before and after."""
    url = make_url(PG_URL)
    tcp = TcpProxy((url.host or "127.0.0.1", url.port or 5432))
    outage.DATABASE.reset()
    yield tcp
    tcp.down()
    outage.DATABASE.reset()


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """A migrated, empty database: a fresh SQLite file, or the truncated PostgreSQL database."""
    if request.param == "sqlite":
        eng = make_engine(f"sqlite:///{tmp_path / 'conveyor.db'}")
        upgrade(eng)
        yield eng
        eng.dispose()
    else:
        eng = request.getfixturevalue("pg_engine")
        _truncate(eng)
        yield eng
        _truncate(eng)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """A real S3-compatible server (moto) on a free loopback port, for the whole session."""
    with start_s3_server() as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> str:
    """A fresh, empty bucket on :func:`s3_server`."""
    return s3_server.bucket()


@pytest.fixture(params=["file", "s3"])
def storage_keys(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """``[storage]`` keys (JSON-able) of an empty store: a fresh folder, or a fresh bucket on
    the session's moto server (so a test using it runs on both kinds of store)."""
    keys: dict[str, Any] = {"work_dir": str(tmp_path / "work"), "part_size": PART}
    if request.param == "file":
        return {**keys, "root": str(tmp_path / "objects")}
    server: S3Server = request.getfixturevalue("s3_server")
    return {**keys, **server.storage_settings(server.bucket(), "pre/fix")}


@pytest.fixture
def object_store(storage_keys: dict[str, Any]) -> ObjectStore:
    """The empty store ``storage_keys`` names: a folder, then a bucket."""
    return open_store(StorageSettings(**storage_keys))


@pytest.fixture
def clock() -> FakeClock:
    """A clock that moves only when the test says so."""
    return FakeClock()


@pytest.fixture
def corpus() -> Path:
    """The shared corpus folder (used in place, never copied)."""
    return need_corpus(CORPUS)


@pytest.fixture
def wav(corpus: Path) -> bytes:
    """The bytes of the corpus's ``jfk.wav`` (11 s of speech), for upload tests."""
    return (corpus / "audio" / "jfk.wav").read_bytes()


@pytest.fixture
def audio_corpus() -> Path:
    """The shared corpus's audio folder (used in place, never copied)."""
    return need_corpus(AUDIO_CORPUS)


def _ci_skip_failure(longrepr: object) -> str:
    # A skip's longrepr is (path, line, "Skipped: reason").
    where = f"{longrepr[0]}:{longrepr[1]}: " if isinstance(longrepr, tuple) else ""
    reason = longrepr[2] if isinstance(longrepr, tuple) else longrepr
    return f"{where}skipped under CI=true, where nothing may skip ({reason})"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under ``CI=true`` a skipped test is reported as failed: a skip there proves nothing."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = _ci_skip_failure(report.longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """Under ``CI=true`` a module skipped at collection is a failure too."""
    outcome = yield
    report: pytest.CollectReport = outcome.get_result()  # type: ignore[attr-defined]
    if in_ci() and report.skipped:
        report.outcome = "failed"
        report.longrepr = _ci_skip_failure(report.longrepr)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``quarantine`` (known to fail intermittently, each with its reason) are left
    out unless ``-m`` names ``quarantine``; docs/operations.md lists them."""
    if "quarantine" in (config.option.markexpr or ""):
        return
    kept = [item for item in items if item.get_closest_marker("quarantine") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = kept
