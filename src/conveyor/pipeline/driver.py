"""Statements compiled once and run for many rows straight through the database driver.

SQLAlchemy Core builds and compiles the engine's statements; for the two that run once per
record of a batch (the guarded outcome update and the journal insert), its per-row parameter
processing cost more than the database's own work on SQLite. A :class:`ManyStatement` keeps the
compiled text and hands the driver plain parameter rows, applying the same type conversions
(bind processors) SQLAlchemy would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from sqlalchemy import Connection
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["ManyStatement", "dialect_key"]


def dialect_key(dialect: Dialect) -> tuple[object, ...]:
    """What decides a statement's compiled text: the dialect, its driver, the server version."""
    return (dialect.name, dialect.driver, getattr(dialect, "server_version_info", None))


class ManyStatement:
    """``statement`` compiled for ``dialect`` for many parameter rows naming ``keys``.

    Binds that no row names keep the value they had when the statement was built, or the one
    their callable gives at each run (a test clock bound in place of the database's, D17).
    """

    def __init__(self, statement: ClauseElement, dialect: Dialect, keys: Iterable[str]) -> None:
        compiled = cast(
            SQLCompiler,
            statement.compile(dialect=dialect, column_keys=list(keys), for_executemany=True),
        )
        self._compiled = compiled
        self.sql = compiled.string
        positions = compiled.positiontup
        self._names: list[str] = (
            list(positions)
            if positions is not None
            else list(compiled.construct_params(_check=False))
        )
        self._positional = positions is not None
        # Per-element processors (tuple binds) do not occur in the statements run here.
        self._processors: dict[str, Callable[[Any], Any]] = {
            name: cast(Callable[[Any], Any], process)
            for name, process in compiled._bind_processors.items()
            if name in self._names and callable(process)
        }

    def run(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> int:
        """Run the statement once per row in the open transaction of ``conn``.

        Returns:
            Rows matched, summed over all parameter rows (the driver's ``rowcount``).
        """
        fixed = self._compiled.construct_params(_check=False)
        processors = self._processors
        names = self._names
        converted: list[Any] = []
        for row in rows:
            values = []
            for name in names:
                value = row[name] if name in row else fixed[name]
                if value is not None and name in processors:
                    value = processors[name](value)
                values.append(value)
            converted.append(
                tuple(values) if self._positional else dict(zip(names, values, strict=True))
            )
        result = conn.exec_driver_sql(self.sql, converted if len(converted) > 1 else converted[0])
        matched = int(result.rowcount)
        result.close()  # rows a RETURNING sent back are not read
        return matched
