"""Reservations: the instance the autoscaler bought for a queued job.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reservations",
        sa.Column("job_id", sa.String(length=128), sa.ForeignKey("jobs.job_id"), primary_key=True),
        sa.Column("instance_id", sa.String(length=128), nullable=False),
        sa.Column("on_demand", sa.Boolean(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seconds_per_step", sa.Float(), nullable=False),
        sa.Column("margin_seconds", sa.Float(), nullable=False),
    )
    op.create_index("ix_reservations_expires_at", "reservations", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_reservations_expires_at", table_name="reservations")
    op.drop_table("reservations")
