"""Photos per second over a slow link: the worker reaches PostgreSQL and the bucket through a
delaying TCP proxy on loopback, beside the same run with no delay.

Each run uploads ``--photos`` corpus JPEGs into an album (through no delay), then starts one
worker pool serving the ``short`` lane with ``--workers`` threads, and times it from start until
every photo is ``done``. The database and the bucket (a moto S3 server on loopback) are reached
through :class:`tests.support.tcp_proxy.TcpProxy`, which delivers every chunk ``--delay``
seconds after it was sent, each way (its ``latency``: chunks in flight do not wait for each
other, as on a real link): ``--delay 0.025`` is a 50 ms round trip, a link between racks or
zones. Database round trips per photo are counted on the wire (the times the worker spoke
after PostgreSQL had answered) and at the driver (statements, BEGIN, COMMIT, ROLLBACK, as
:class:`tests.support.round_trips.RoundTrips` does); S3 requests at boto3 (one per request).

Run from the project root: ``.venv/bin/python -m bench.bench_latency --postgres
postgresql://…/db [--photos 24] [--workers 4] [--delay 0.025] [--prefetch 0]``. The database's
public schema is dropped and re-created.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.engine import make_url

from conveyor.config import Settings
from conveyor.db.engine import make_engine
from conveyor.db.migrate import upgrade
from conveyor.db.tables import media_items
from conveyor.media.albums import create_album
from conveyor.media.intake import accept_media
from conveyor.runtime import Runtime
from tests.support.needs import MEDIA_CORPUS
from tests.support.round_trips import RoundTrips
from tests.support.s3server import free_port
from tests.support.tcp_proxy import TcpProxy


def _moto() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/moto-api/", timeout=1).close()
            return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("moto did not start")


def _photos() -> list[Path]:
    return sorted(p for p in MEDIA_CORPUS.glob("exif-samples__*.jpg"))


def run_once(
    pg_url: str,
    s3_port: int,
    bucket: str,
    delay: float,
    photos: int,
    workers: int,
    prefetch: int = 0,
) -> dict[str, Any]:
    url = make_url(pg_url)
    db_proxy = TcpProxy((url.host or "127.0.0.1", url.port or 5432))
    s3_proxy = TcpProxy(("127.0.0.1", s3_port))
    direct = make_engine(pg_url)
    with direct.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE"))
        conn.execute(text("CREATE SCHEMA public"))
    upgrade(direct)
    direct.dispose()
    settings = Settings(
        database={
            "url": url.set(host="127.0.0.1", port=db_proxy.port).render_as_string(
                hide_password=False
            )
        },  # type: ignore[arg-type]
        storage={  # type: ignore[arg-type]
            "url": f"s3://{bucket}/run{int(delay * 1000)}",
            "endpoint": f"http://127.0.0.1:{s3_proxy.port}",
            "path_style": True,
            "access_key_id": "bench",
            "secret_access_key": "bench-secret",
            "root": Path(os.environ.get("TMPDIR", "/tmp")) / "conveyor-bench-latency",
        },
        media={"short_workers": workers, "long_workers": 0},  # type: ignore[arg-type]
        pipeline={"workers": 0, "poll_interval": 0.5, "prefetch": prefetch},  # type: ignore[arg-type]
    )
    runtime = Runtime(settings)
    sources = _photos()
    for n in range(photos):
        # An owner keeps each file once: one owner (and album) per round over the corpus.
        owner = f"bench-{n // len(sources)}"
        if n % len(sources) == 0:
            album = create_album(runtime.engine, runtime.clock, owner=owner, name="latency")
        accept_media(
            runtime.engine,
            runtime.store,
            runtime.clock,
            sources[n % len(sources)],
            album_id=album,
            owner=owner,
            max_pixels=settings.media.max_pixels,
        )
    counts = {"s3": 0}
    lock = threading.Lock()

    def on_s3(**_kw: Any) -> None:
        with lock:
            counts["s3"] += 1

    trips = RoundTrips(runtime.engine)
    runtime.store.client.meta.events.register("before-send.s3", on_s3)  # type: ignore[attr-defined]
    db_proxy.latency = s3_proxy.latency = delay
    turns = db_proxy.turns
    pool = runtime.pool({"short": workers})
    started = time.perf_counter()
    pool.start()
    probe = make_engine(pg_url)
    try:
        while True:
            with probe.connect() as conn:
                stages = conn.execute(select(media_items.c.stage)).scalars().all()
            if all(s == "done" for s in stages):
                break
            if time.perf_counter() - started > 900:
                raise RuntimeError(f"not done after 15 minutes: {stages}")
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        wire = db_proxy.turns - turns
    finally:
        pool.stop()
        trips.close()
        probe.dispose()
        runtime.engine.dispose()
        db_proxy.down()
        s3_proxy.down()
    # Idle polls after the last photo add a few statements; they are counted too (an upper bound).
    return {
        "delay_ms": delay * 1000,
        "photos": photos,
        "seconds": seconds,
        "photos_per_s": photos / seconds,
        "db_round_trips_per_photo": sum(trips.counts.values()) / photos,
        "db_wire_round_trips_per_photo": wire / photos,
        "s3_requests_per_photo": counts["s3"] / photos,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True)
    parser.add_argument("--photos", type=int, default=24)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--delay", type=float, default=0.025, help="seconds each way")
    parser.add_argument("--prefetch", type=int, default=0, help="[pipeline] prefetch")
    args = parser.parse_args()
    moto, port = _moto()
    try:
        import boto3

        boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{port}",
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench-secret",
        ).create_bucket(Bucket="latency")
        rows = [
            run_once(
                args.postgres, port, "latency", delay, args.photos, args.workers, args.prefetch
            )
            for delay in (0.0, args.delay)
        ]
    finally:
        moto.terminate()
        moto.wait()
    base = rows[0]["photos_per_s"]
    print(
        f"load average {os.getloadavg()[0]:.1f}; {args.workers} short workers, "
        f"prefetch {args.prefetch}"
    )
    print(
        "link RTT   photos/s  ratio  seconds  DB round trips/photo (wire, driver)"
        "  S3 requests/photo"
    )
    for row in rows:
        print(
            f"{2 * row['delay_ms']:5.0f} ms  {row['photos_per_s']:8.2f}  "
            f"{row['photos_per_s'] / base:5.2f}  {row['seconds']:7.1f}  "
            f"{row['db_wire_round_trips_per_photo']:19.1f}, "
            f"{row['db_round_trips_per_photo']:6.1f}  {row['s3_requests_per_photo']:17.1f}"
        )


if __name__ == "__main__":
    main()
