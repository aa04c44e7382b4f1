"""The database's clock and random claim tokens as SQL expressions (D17, P2).

Every time that decides who may act is read from the database inside the statement that acts,
so a worker whose clock is off can neither steal a live claim nor write a lease born expired
(D17). Times are epoch seconds as double precision, like every stored time.

* PostgreSQL: ``statement_timestamp()``: stable within a statement (the planner may use it
  against an index), moving between the statements of one transaction.
* SQLite: ``julianday('now')``: the clock of the host holding the file, millisecond precision.

Tokens made in the statement let one claim statement give every claimed row a token of its own.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Double, String
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement

__all__ = ["db_now", "db_token"]


class db_now(FunctionElement[float]):
    """The database's current time in epoch seconds (double precision)."""

    type = Double()
    inherit_cache = True
    name = "db_now"


@compiles(db_now, "postgresql")
def _db_now_postgresql(_element: db_now, _compiler: Any, **_kw: Any) -> str:
    return "CAST(EXTRACT(EPOCH FROM statement_timestamp()) AS DOUBLE PRECISION)"


@compiles(db_now, "sqlite")
def _db_now_sqlite(_element: db_now, _compiler: Any, **_kw: Any) -> str:
    # 2440587.5 is the Julian day of the Unix epoch.
    return "((julianday('now') - 2440587.5) * 86400.0)"


class db_token(FunctionElement[str]):
    """A fresh random 128-bit claim token, 32 lowercase hex characters, evaluated per row."""

    type = String(32)
    inherit_cache = True
    name = "db_token"


@compiles(db_token, "postgresql")
def _db_token_postgresql(_element: db_token, _compiler: Any, **_kw: Any) -> str:
    return "replace(CAST(gen_random_uuid() AS TEXT), '-', '')"


@compiles(db_token, "sqlite")
def _db_token_sqlite(_element: db_token, _compiler: Any, **_kw: Any) -> str:
    return "lower(hex(randomblob(16)))"
