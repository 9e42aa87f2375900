"""What the HTTP API reads and writes: each job's cost tags as columns (the job list filters by
them), API tokens (stored as SHA-256 digests, never as themselves), and each running attempt's
progress as its worker last reported it.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TAGS = ("team", "customer", "project")


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        for tag in TAGS:
            batch.add_column(sa.Column(tag, sa.String(length=128), nullable=True))
    for tag in TAGS:
        op.create_index(f"ix_jobs_{tag}", "jobs", [tag])
    _backfill_tags()
    op.create_table(
        "api_tokens",
        sa.Column("token_id", sa.String(length=32), primary_key=True),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("scopes", sa.String(length=128), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_api_tokens_sha256", "api_tokens", ["sha256"], unique=True)
    op.create_table(
        "job_progress",
        sa.Column("job_id", sa.String(length=128), sa.ForeignKey("jobs.job_id"), primary_key=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("total_steps", sa.Integer(), nullable=False),
        sa.Column("reported_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_step", sa.Integer(), nullable=False),
        sa.Column("first_at", sa.DateTime(timezone=True), nullable=False),
    )


def _backfill_tags() -> None:
    """Jobs accepted before this revision: their tags, from their stored spec."""
    jobs = sa.table(
        "jobs",
        sa.column("job_id", sa.String()),
        sa.column("spec_json", sa.Text()),
        *(sa.column(tag, sa.String()) for tag in TAGS),
    )
    connection = op.get_bind()
    for job_id, spec_json in connection.execute(sa.select(jobs.c.job_id, jobs.c.spec_json)):
        tags = json.loads(spec_json).get("tags") or {}
        values = {tag: tags.get(tag) for tag in TAGS if tags.get(tag)}
        if values:
            connection.execute(jobs.update().where(jobs.c.job_id == job_id).values(**values))


def downgrade() -> None:
    op.drop_table("job_progress")
    op.drop_index("ix_api_tokens_sha256", table_name="api_tokens")
    op.drop_table("api_tokens")
    for tag in TAGS:
        op.drop_index(f"ix_jobs_{tag}", table_name="jobs")
    with op.batch_alter_table("jobs") as batch:
        for tag in reversed(TAGS):
            batch.drop_column(tag)
