"""`instance_lives.gpu_layout`: how MIG splits an instance's GPUs into slots (each slot's GPU
and part of its compute), from its worker's first hello, so the cost ledger charges a slot's
jobs that part of the GPU's price.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("instance_lives") as batch:
        batch.add_column(sa.Column("gpu_layout", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("instance_lives") as batch:
        batch.drop_column("gpu_layout")
