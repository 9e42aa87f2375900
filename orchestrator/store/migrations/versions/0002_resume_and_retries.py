"""Jobs remember their newest durable checkpoint, their job-fault count, and a retry backoff.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("last_checkpoint", sa.Text(), nullable=True))
        batch.add_column(sa.Column("job_faults", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("not_before", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("not_before")
        batch.drop_column("job_faults")
        batch.drop_column("last_checkpoint")
