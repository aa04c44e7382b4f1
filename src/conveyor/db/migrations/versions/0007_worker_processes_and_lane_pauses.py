"""worker processes (who runs, where, what each holds, draining) and lane pauses

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01 16:00:00

Only adds tables: a process of the previous release keeps working on the upgraded schema (it
neither registers nor sees pauses; ``conveyor workers`` does not list it).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "worker_processes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=50), nullable=False),
        sa.Column("lanes", sa.JSON(), nullable=False),
        sa.Column("busy", sa.JSON(), nullable=False),
        sa.Column("holding", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("last_seen_at", sa.Double(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("drain_requested_at", sa.Double(), nullable=True),
        sa.Column("stopped_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_worker_processes")),
    )
    op.create_index(op.f("ix_worker_processes_last_seen_at"), "worker_processes", ["last_seen_at"])
    op.create_table(
        "lane_pauses",
        sa.Column("lane", sa.String(length=50), nullable=False),
        sa.Column("paused_at", sa.Double(), nullable=False),
        sa.Column("reason", sa.String(length=300), nullable=True),
        sa.PrimaryKeyConstraint("lane", name=op.f("pk_lane_pauses")),
    )


def downgrade() -> None:
    op.drop_table("lane_pauses")
    op.drop_index(op.f("ix_worker_processes_last_seen_at"), table_name="worker_processes")
    op.drop_table("worker_processes")
