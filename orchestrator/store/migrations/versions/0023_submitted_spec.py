"""Each job's `submitted_sha256`: the fingerprint of the spec its producer sent, kept when an
operator changes a queued job's priority or deadline (which changes its spec), so that the
producer's resend of the same job is still a duplicate, not a conflict. None: never changed
(the spec's own fingerprint is the one sent).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("submitted_sha256", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("submitted_sha256")
