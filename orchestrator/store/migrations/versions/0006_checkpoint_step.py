"""The step of the newest durable checkpoint, stored as a number (it used to be parsed out of
the manifest's key); existing rows are filled from their key once, here.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_STEP = re.compile(r"/(\d+)/(\d{6})/manifest\.json$")


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("checkpoint_step", sa.Integer(), nullable=False, server_default="0")
        )
    jobs = sa.table(
        "jobs",
        sa.column("job_id", sa.String),
        sa.column("last_checkpoint", sa.Text),
        sa.column("checkpoint_step", sa.Integer),
    )
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(jobs.c.job_id, jobs.c.last_checkpoint).where(jobs.c.last_checkpoint.isnot(None))
    ).all()
    for job_id, key in rows:
        found = _STEP.search(key or "")
        if found:
            connection.execute(
                jobs.update()
                .where(jobs.c.job_id == job_id)
                .values(checkpoint_step=int(found.group(2)))
            )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("checkpoint_step")
