"""Jobs, attempts, the job event history and the dead-letter ledger.

Revision ID: 0001
Revises:
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _utc(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("job_id", sa.String(length=128), primary_key=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        _utc("deadline", nullable=True),
        sa.Column("model", sa.String(length=130), nullable=False),
        sa.Column("spec_json", sa.Text(), nullable=False),
        sa.Column("spec_sha256", sa.String(length=64), nullable=False),
        sa.Column("source_message_id", sa.String(length=128), nullable=False),
        _utc("created_at"),
        _utc("updated_at"),
    )
    op.create_index("ix_jobs_state", "jobs", ["state"])
    op.create_index("ix_jobs_created_at", "jobs", ["created_at"])
    op.create_table(
        "job_attempts",
        sa.Column("job_id", sa.String(length=128), sa.ForeignKey("jobs.job_id"), primary_key=True),
        sa.Column("attempt", sa.Integer(), primary_key=True),
        sa.Column("worker_id", sa.String(length=128), nullable=True),
        _utc("started_at"),
        _utc("ended_at", nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
    )
    op.create_table(
        "job_events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(length=128), sa.ForeignKey("jobs.job_id"), nullable=False),
        _utc("at"),
        sa.Column("from_state", sa.String(length=16), nullable=True),
        sa.Column("to_state", sa.String(length=16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.UniqueConstraint("job_id", "version", name="uq_job_events_job_version"),
    )
    op.create_index("ix_job_events_job_id", "job_events", ["job_id"])
    op.create_table(
        "rejected_messages",
        sa.Column("message_id", sa.String(length=128), primary_key=True),
        _utc("received_at"),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("errors_json", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        _utc("dead_lettered_at", nullable=True),
    )
    op.create_index("ix_rejected_messages_received_at", "rejected_messages", ["received_at"])


def downgrade() -> None:
    op.drop_table("rejected_messages")
    op.drop_table("job_events")
    op.drop_table("job_attempts")
    op.drop_table("jobs")
