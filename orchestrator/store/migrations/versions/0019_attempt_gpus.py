"""`job_attempt_gpus`: every GPU an attempt holds, so a job may span several GPUs of one
worker (`gpu.count`) and the database still refuses two open attempts on one GPU. The open
attempts of before are copied in, each on its one GPU.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_attempt_gpus",
        sa.Column("job_id", sa.String(length=128), sa.ForeignKey("jobs.job_id"), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("gpu_index", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(length=128), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("job_id", "attempt", "gpu_index"),
    )
    op.create_index(
        "uq_job_attempt_gpus_open",
        "job_attempt_gpus",
        ["worker_id", "gpu_index"],
        unique=True,
        sqlite_where=sa.text("ended_at IS NULL"),
        postgresql_where=sa.text("ended_at IS NULL"),
    )
    op.execute(
        "INSERT INTO job_attempt_gpus (job_id, attempt, gpu_index, worker_id, ended_at) "
        "SELECT job_id, attempt, gpu_index, worker_id, NULL FROM job_attempts "
        "WHERE ended_at IS NULL AND worker_id IS NOT NULL AND gpu_index IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_index("uq_job_attempt_gpus_open", table_name="job_attempt_gpus")
    op.drop_table("job_attempt_gpus")
