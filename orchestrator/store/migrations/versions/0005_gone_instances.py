"""Gone instances: terminated or interrupted, never to be given work again.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gone_instances",
        sa.Column("instance_id", sa.String(length=64), primary_key=True),
        sa.Column("gone_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
    )
    op.create_index("ix_gone_instances_gone_at", "gone_instances", ["gone_at"])


def downgrade() -> None:
    op.drop_index("ix_gone_instances_gone_at", table_name="gone_instances")
    op.drop_table("gone_instances")
