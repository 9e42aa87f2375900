"""Drain requests: an instance to empty before it is terminated (the autoscaler scaling in, or
AWS recommending a rebalance); the control plane says when it is empty.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "drain_requests",
        sa.Column("instance_id", sa.String(length=64), primary_key=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("drained_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False, server_default="scale-in"),
    )


def downgrade() -> None:
    op.drop_table("drain_requests")
