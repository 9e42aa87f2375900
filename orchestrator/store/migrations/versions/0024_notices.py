"""`notices` (the outbox of completion notices: each job's end, and its interruptions and
resumes where asked, to a webhook or the EventBridge bus, until delivered or given up) and
`notice_cursor` (how far their relay has read the job history).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "notices",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("notice_id", sa.String(length=64), nullable=False),
        sa.Column("target", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("notice_id", "target", name="uq_notices_notice_target"),
    )
    op.create_index("ix_notices_job_id", "notices", ["job_id"])
    op.create_index("ix_notices_state", "notices", ["state"])
    op.create_index("ix_notices_next_at", "notices", ["next_at"])
    op.create_table(
        "notice_cursor",
        sa.Column("name", sa.String(length=32), primary_key=True),
        sa.Column("last_event_id", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("notice_cursor")
    op.drop_index("ix_notices_next_at", table_name="notices")
    op.drop_index("ix_notices_state", table_name="notices")
    op.drop_index("ix_notices_job_id", table_name="notices")
    op.drop_table("notices")
