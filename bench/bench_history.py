"""Cost flat with history: one claim over 10,000 waiting records, beside no finished record and
beside 1,000,000 finished ones, with and without ``ANALYZE`` after the bulk load.

Each figure is the median time of ``--claims`` claims of the audio lane as its producer sends
them (4 records each, as four idle workers would), each in a transaction rolled back so that every
claim sees the same table. The history is written in one statement (``generate_series`` on
PostgreSQL, a recursive CTE on SQLite).

Run: ``.venv/bin/python bench/bench_history.py [--postgres postgresql://…]``. The PostgreSQL
database is used as given: its schema is dropped and migrated again.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import Engine, insert, text

from conveyor.audio.stages import AUDIO
from conveyor.clock import SystemClock
from conveyor.db.engine import make_engine
from conveyor.db.migrate import upgrade
from conveyor.db.tables import files
from conveyor.pipeline import Advance, StepContext, queries
from conveyor.pipeline.outcomes import Outcome
from conveyor.pipeline.producer import LaneClaims

WAITING, FINISHED = 10_000, 1_000_000


def noop(_ctx: StepContext) -> Outcome:
    return Advance()


def add_records(engine: Engine, first: int, count: int, stage: str) -> None:
    columns = (
        "owner, created_at, original_file_id, raw_pcm, stage, state_entered_at, attempts, "
        "updated_at"
    )
    false = "false" if engine.dialect.name == "postgresql" else "0"
    values = f"'ann', n, 1, {false}, '{stage}', n, 0, n"
    last = first + count - 1
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(
                text(
                    f"INSERT INTO audio_records ({columns}) "
                    f"SELECT {values} FROM generate_series({first}, {last}) AS g(n)"
                )
            )
        else:
            conn.execute(
                text(
                    f"WITH RECURSIVE g(n) AS (SELECT {first} UNION ALL SELECT n + 1 FROM g "
                    f"WHERE n < {last}) INSERT INTO audio_records ({columns}) "
                    f"SELECT {values} FROM g"
                )
            )


def claim_ms(engine: Engine, claims: int) -> float:
    """Median milliseconds of the claim as the lane's producer sends it (on PostgreSQL the claim
    and its read in one statement, after the planner settings of a table without statistics),
    each rolled back."""
    domain = AUDIO.bind({name: noop for name in AUDIO.stage_names[:-1]})
    lane = LaneClaims(domain, "audio", queries.now_of(SystemClock()))
    postgres = engine.dialect.name == "postgresql"
    times = []
    with engine.connect() as conn:
        for _ in range(claims):
            # A table without statistics yet is claimed under NO_SORT (LaneClaims).
            no_sort = postgres and lane.needs_no_sort(conn)
            with conn.begin() as tx:
                started = time.perf_counter()
                if no_sort:
                    conn.exec_driver_sql(queries.NO_SORT)
                if postgres:
                    got = len(queries.claim_and_read(conn, lane.started_read, 4))
                else:
                    got = len(queries.claim_with(conn, lane.started, 4))
                times.append(time.perf_counter() - started)
                assert got == 4
                tx.rollback()
    return statistics.median(times) * 1000


def run(database: str, url: str, claims: int) -> None:
    engine = make_engine(url)
    if database == "postgresql":
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
    upgrade(engine)
    with engine.begin() as conn:
        conn.execute(
            insert(files).values(
                id=1, key="u/1", mime_type="audio/wav", size=1, state="stored", created_at=0.0
            )
        )
    # The waiting records come after the history in time (newer), as they would.
    add_records(engine, FINISHED + 1, WAITING, "uploaded")
    alone = claim_ms(engine, claims)
    started = time.perf_counter()
    add_records(engine, 1, FINISHED, "done")
    filled = time.perf_counter() - started
    beside = claim_ms(engine, claims)
    with engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    analysed = claim_ms(engine, claims)
    print(
        f"{database:10} claim of 4 over {WAITING:,} waiting: {alone:6.3f} ms alone, "
        f"{beside:6.3f} ms beside {FINISHED:,} finished ({beside / alone:4.2f}×), "
        f"{analysed:6.3f} ms after ANALYZE ({analysed / alone:4.2f}×); history written in "
        f"{filled:.1f} s"
    )
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--postgres", help="a PostgreSQL URL; SQLite only without it")
    parser.add_argument("--claims", type=int, default=200)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="conveyor-bench-history-"))
    run("sqlite", f"sqlite:///{folder / 'history.db'}", args.claims)
    if args.postgres:
        run("postgresql", args.postgres, args.claims)


if __name__ == "__main__":
    main()
