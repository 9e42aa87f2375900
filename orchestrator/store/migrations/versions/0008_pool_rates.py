"""Pool interruption rates: what the autoscaler measured for each spot pool, so the control
plane can send each assignment the Young/Daly checkpoint interval of its worker's pool; and
each finished attempt's denoising time, which the autoscaler's throughput model learns.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pool_rates",
        sa.Column("instance_type", sa.String(length=64), primary_key=True),
        sa.Column("availability_zone", sa.String(length=64), primary_key=True),
        sa.Column("interruptions_per_hour", sa.Float(), nullable=False),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
    )
    # What a finished attempt's denoising took: the autoscaler's throughput model learns it.
    with op.batch_alter_table("job_attempts") as batch:
        batch.add_column(sa.Column("denoise_seconds", sa.Float(), nullable=True))
    # The scheduler asks for attempts that ended through a worker's fault at every tick.
    op.create_index("ix_job_attempts_outcome", "job_attempts", ["outcome"])


def downgrade() -> None:
    op.drop_index("ix_job_attempts_outcome", table_name="job_attempts")
    with op.batch_alter_table("job_attempts") as batch:
        batch.drop_column("denoise_seconds")
    op.drop_table("pool_rates")
