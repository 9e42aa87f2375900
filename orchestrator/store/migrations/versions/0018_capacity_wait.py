"""Each queued job's `capacity_wait`: why the autoscaler bought no GPU for it in its last round
("no spot pool available now; no deadline, so it waits"), beside the scheduler's
`wait_reason`, for `framefleet job`, the API and the console.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("capacity_wait", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("capacity_wait")
