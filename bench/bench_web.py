"""``python -m bench.bench_web``: how long the web app's pages take with 10,000 of everything.

One owner with ``--records`` recordings (the five stages in turn, every seventh halted, so
most rows of a page wait and have their place in the queue counted), one album with
``--items`` photos and as many halted items for the operator view; then each page is fetched
through the ASGI app in process (``TestClient``, no network) ``--repeat`` times and the median
and the slowest are reported in milliseconds, on SQLite and, with ``--postgres URL``, on
PostgreSQL (the database is emptied first: give it one of its own). Deep pages are fetched by
their cursor, as the ``Older`` links do. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert, text

PAGES = [
    ("records, first page", "/records"),
    ("records, page 100", "/records?before={record_deep}"),
    ("records, halted only", "/records?show=halted"),
    ("records, counts", "/records/counts"),
    ("album grid, first page", "/albums/1"),
    ("album grid, page 100", "/albums/1?before={item_deep}"),
    ("operator view", "/operator"),
    ("operator, halted page 50", "/operator?domain=media&before={halted_deep}"),
]


def _fill(engine: Engine, records: int, items: int) -> dict[str, str]:
    from conveyor.db.tables import albums, audio_records, files, media_items
    from conveyor.web.keyset import cursor_text

    now = time.time()
    stages = ["uploaded", "normalized", "submitted", "transcribed", "done"]
    queue = {"attempts": 0, "updated_at": now}
    with engine.begin() as conn:
        conn.execute(
            insert(files).values(
                id=1, key="u/1", mime_type="audio/wav", size=1, state="stored", created_at=now
            )
        )
        conn.execute(
            insert(audio_records),
            [
                {
                    "id": n,
                    "owner": "alice",
                    "original_name": f"r{n}.ogg",
                    "created_at": now - records + n,
                    "original_file_id": 1,
                    "stage": stages[n % 5],
                    "state_entered_at": now - records + n,
                    "halted_at": now - records + n if n % 7 == 0 else None,
                    "halt_reason": "undecodable" if n % 7 == 0 else None,
                    **queue,
                }
                for n in range(1, records + 1)
            ],
        )
        conn.execute(insert(albums).values(id=1, owner="alice", name="Big", created_at=now))
        conn.execute(
            insert(media_items),
            [
                {
                    "id": n,
                    "owner": "alice",
                    "album_id": 1,
                    "kind": "photo",
                    "original_name": f"p{n}.jpg",
                    "uploaded_at": now - 2 * items + n,
                    "stage": "done" if n <= items else "uploaded",
                    "state_entered_at": now,
                    "halted_at": now - 2 * items + n if n > items else None,
                    "halt_reason": "undecodable" if n > items else None,
                    **queue,
                }
                for n in range(1, 2 * items + 1)
            ],
        )
    # The cursors the Older links would carry 99 (grid: 99 x 60) or 49 (operator) pages on.
    item = 2 * items - 99 * 60
    halted = 2 * items - 49 * 100
    return {
        "record_deep": str(records - 99 * 50 + 1),
        "item_deep": cursor_text(now - 2 * items + item, item),
        "halted_deep": cursor_text(now - 2 * items + halted, halted),
    }


def _measure(engine: Engine, work: Path, records: int, items: int, repeat: int) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from conveyor.accounts import add_user, passwords, set_admin, set_password
    from conveyor.config import Settings
    from conveyor.runtime import Runtime
    from conveyor.web import create_app

    cursors = _fill(engine, records, items)
    settings = Settings(
        storage={"root": work / "data"},
        pipeline={"workers": 0},
        media={"short_workers": 0, "long_workers": 0},
    )  # type: ignore[arg-type]
    runtime = Runtime(settings, None, engine=engine)
    add_user(engine, runtime.clock, "alice")
    set_password(engine, "alice", "alice-password-1")
    set_admin(engine, "alice", True)
    del passwords
    out: dict[str, Any] = {}
    with TestClient(create_app(runtime, run_workers=False)) as client:
        page = client.get("/sign-in", headers={"Accept": "text/html"})
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        client.post(
            "/sign-in",
            data={"username": "alice", "password": "alice-password-1", "csrf_token": token[1]},
        )
        for name, path in PAGES:
            url = path.format(**cursors)
            times = []
            for _ in range(repeat):
                started = time.perf_counter()
                reply = client.get(url, headers={"Accept": "text/html"})
                times.append((time.perf_counter() - started) * 1000)
                assert reply.status_code == 200, (url, reply.status_code)
            out[name] = {
                "median_ms": round(statistics.median(times), 1),
                "max_ms": round(max(times), 1),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--postgres", help="postgresql://… of a database this may empty")
    args = parser.parse_args()
    from conveyor.db.engine import make_engine
    from conveyor.db.migrate import upgrade

    result: dict[str, Any] = {
        "records": args.records,
        "items": args.items,
        "repeat": args.repeat,
        "load_before": os.getloadavg()[0],
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        engine = make_engine(f"sqlite:///{work / 'conveyor.db'}")
        upgrade(engine)
        result["sqlite"] = _measure(engine, work, args.records, args.items, args.repeat)
        engine.dispose()
        if args.postgres:
            engine = make_engine(args.postgres)
            with engine.begin() as conn:
                conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
                conn.execute(text("CREATE SCHEMA public"))
            upgrade(engine)
            result["postgresql"] = _measure(engine, work, args.records, args.items, args.repeat)
            engine.dispose()
    result["load_after"] = os.getloadavg()[0]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
