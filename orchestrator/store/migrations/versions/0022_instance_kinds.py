"""The GPU instance types EC2 described to the autoscaler (DescribeInstanceTypes): GPU family,
count and memory as a worker will report it, and vCPUs. The control plane vets a worker's
hello by them, and an autoscaler that cannot reach EC2 at start uses them before the shipped
table.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "instance_kinds",
        sa.Column("instance_type", sa.String(length=64), primary_key=True),
        sa.Column("family", sa.String(length=16), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("vram_gib", sa.Float(), nullable=False),
        sa.Column("vcpus", sa.Integer(), nullable=False),
        sa.Column("described_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("instance_kinds")
