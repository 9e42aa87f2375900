"""Each job's `start_by`: its deadline less the whole run on the slowest GPU it may use, so
that the scheduler's read of the queue finds every job whose deadline is at risk in one indexed
query, however long the backlog.

Queued jobs stored before it get their deadline less an hour (a migration does not run the step-time
model); new jobs get the estimate.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05
"""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("start_by", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_jobs_start_by", ["start_by"])
    jobs = sa.table(
        "jobs",
        sa.column("job_id", sa.String),
        sa.column("state", sa.String),
        sa.column("deadline", sa.DateTime(timezone=True)),
        sa.column("start_by", sa.DateTime(timezone=True)),
    )
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(jobs.c.job_id, jobs.c.deadline).where(
            jobs.c.deadline.is_not(None), jobs.c.state == "queued"
        )
    ).all()
    for job_id, deadline in rows:
        connection.execute(
            jobs.update()
            .where(jobs.c.job_id == job_id)
            .values(start_by=deadline - timedelta(hours=1))
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_index("ix_jobs_start_by")
        batch.drop_column("start_by")
