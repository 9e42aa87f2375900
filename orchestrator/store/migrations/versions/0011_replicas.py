"""Replicas: the lease whose holder alone schedules (its fence token rides on every write of
its), the database's own guarantee that one GPU holds one attempt at a time, and the pools
the autoscaler avoids or saw interrupted (whichever replica buys next must know them).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

ACTIVE = sa.text("ended_at IS NULL")


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=64), primary_key=True),
        sa.Column("holder", sa.String(length=128), nullable=False),
        sa.Column("fence", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "pool_marks",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("instance_type", sa.String(length=64), nullable=False),
        sa.Column("availability_zone", sa.String(length=64), nullable=False),
        sa.Column("market", sa.String(length=16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("interruption", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_pool_marks_at", "pool_marks", ["at"])
    op.create_index("ix_pool_marks_until", "pool_marks", ["until"])
    op.create_index(
        "uq_job_attempts_active_gpu",
        "job_attempts",
        ["worker_id", "gpu_index"],
        unique=True,
        sqlite_where=ACTIVE,
        postgresql_where=ACTIVE,
    )


def downgrade() -> None:
    op.drop_index("uq_job_attempts_active_gpu", table_name="job_attempts")
    op.drop_index("ix_pool_marks_until", table_name="pool_marks")
    op.drop_index("ix_pool_marks_at", table_name="pool_marks")
    op.drop_table("pool_marks")
    op.drop_table("leases")
