"""The cost ledger's facts: each instance's life as EC2 reported it, each pool's price as it
changed, what each attempt spent loading the model and writing checkpoints, and the finance
reports sent (each period once).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "instance_lives",
        sa.Column("instance_id", sa.String(length=64), primary_key=True),
        sa.Column("instance_type", sa.String(length=64), nullable=False),
        sa.Column("availability_zone", sa.String(length=64), nullable=False),
        sa.Column("market", sa.String(length=16), nullable=False),
        sa.Column("launched_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ready_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("gpu_family", sa.String(length=16), nullable=False),
        sa.Column("draining_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("end_reason", sa.Text(), nullable=True),
    )
    op.create_index("ix_instance_lives_launched_at", "instance_lives", ["launched_at"])
    op.create_table(
        "price_changes",
        sa.Column("instance_type", sa.String(length=64), primary_key=True),
        sa.Column("availability_zone", sa.String(length=64), primary_key=True),
        sa.Column("market", sa.String(length=16), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("usd_per_hour", sa.String(length=32), nullable=False),
    )
    op.create_table(
        "report_sends",
        sa.Column("period", sa.String(length=8), primary_key=True),
        sa.Column("period_start", sa.DateTime(timezone=True), primary_key=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("tries", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("message_id", sa.String(length=128), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("job_attempts") as batch:
        batch.add_column(
            sa.Column("model_load_seconds", sa.Float(), nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column("checkpoint_seconds", sa.Float(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("checkpointed_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("checkpoints", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("job_attempts") as batch:
        batch.drop_column("checkpoints")
        batch.drop_column("checkpointed_at")
        batch.drop_column("checkpoint_seconds")
        batch.drop_column("model_load_seconds")
    op.drop_table("report_sends")
    op.drop_table("price_changes")
    op.drop_index("ix_instance_lives_launched_at", table_name="instance_lives")
    op.drop_table("instance_lives")
