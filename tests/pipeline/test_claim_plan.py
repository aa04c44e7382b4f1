"""P5 at speed: every lane's claim reads its table's partial claim index in the claim's order.

The index holds open records only (``halted_at IS NULL AND stage <> 'done'``); a database uses
such an index only for a query whose WHERE implies that predicate, and SQLite only when it is
stated word for word. Without it, SQLite scanned and sorted the whole table on every claim
(milliseconds at 20,000 records). The plan of each lane's real claim statement is read on both
databases: the index, in order, with no sort step.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, event

from conveyor.audio.stages import AUDIO
from conveyor.clock import SystemClock
from conveyor.media.domain import MEDIA
from conveyor.pipeline import Advance, Declaration, Domain, StepContext, queries
from conveyor.pipeline.outcomes import Outcome


def noop(_ctx: StepContext) -> Outcome:
    return Advance()


def bound(declaration: Declaration) -> Domain:
    return declaration.bind({name: noop for name in declaration.stage_names[:-1]})


def claim_sql(engine: Engine, domain: Domain, lane: str) -> tuple[str, Any]:
    """The claim statement as the driver receives it, with its parameters."""
    statement = queries.claim_statement(
        domain, domain.lane_stages(lane), queries.now_of(SystemClock())
    )
    seen: list[tuple[str, Any]] = []

    def capture(_c: Any, _cur: Any, sql: str, params: Any, *_a: Any) -> None:
        seen.append((sql, params))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        with engine.connect() as conn, conn.begin() as tx:
            queries.claim_with(conn, statement, 100)
            tx.rollback()
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    (found,) = [s for s in seen if s[0].lstrip().upper().startswith("UPDATE")]
    return found


@pytest.mark.parametrize("declaration", [AUDIO, MEDIA], ids=lambda d: d.name)
def test_p5_each_lane_claims_through_the_partial_index_in_order(
    engine: Engine, declaration: Declaration
) -> None:
    domain = bound(declaration)
    index = f"ix_{domain.table.name}_claim"
    for lane in domain.lanes:
        sql, params = claim_sql(engine, domain, lane)
        with engine.connect() as conn:
            if engine.dialect.name == "sqlite":
                plan = [
                    str(r[3]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params)
                ]
                assert any(f"USING INDEX {index}" in step for step in plan), (lane, plan)
                assert not any("TEMP B-TREE" in step for step in plan), (lane, plan)
            else:
                # Whether the planner may use the index at all (an empty table would be
                # scanned anyway): with other paths priced out, the index in order remains.
                with conn.begin():
                    conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
                    conn.exec_driver_sql("SET LOCAL enable_bitmapscan = off")
                    plan = [str(r[0]) for r in conn.exec_driver_sql("EXPLAIN " + sql, params)]
                assert any(f"using {index}" in step for step in plan), (lane, plan)
                assert not any("Sort" in step for step in plan), (lane, plan)
