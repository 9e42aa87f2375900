"""One record per instance (`instances`, with its history in `instance_changes`) in the state
machine the autoscaler and the control plane share, instead of the gone-instances and
drain-requests tables; and the preemption holds, durable so a new leader keeps them.

Gone instances become terminated (their hellos stay refused); drain requests become draining
or drained instances with their request.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    instances = op.create_table(
        "instances",
        sa.Column("instance_id", sa.String(length=64), primary_key=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("since", _UTC, nullable=False),
        sa.Column("drain_kind", sa.String(length=16), nullable=True),
        sa.Column("drain_reason", sa.Text(), nullable=True),
        sa.Column("drain_asked_at", _UTC, nullable=True),
        sa.Column("drained_at", _UTC, nullable=True),
    )
    op.create_index("ix_instances_state", "instances", ["state"])
    op.create_index("ix_instances_since", "instances", ["since"])
    op.create_table(
        "instance_changes",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("instance_id", sa.String(length=64), nullable=False),
        sa.Column("at", _UTC, nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=True),
        sa.Column("to_state", sa.String(length=16), nullable=False),
        sa.Column("actor", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
    )
    op.create_index("ix_instance_changes_instance_id", "instance_changes", ["instance_id"])
    op.create_table(
        "preemption_holds",
        sa.Column("worker_id", sa.String(length=64), primary_key=True),
        sa.Column("gpu_index", sa.Integer(), primary_key=True),
        sa.Column("job_id", sa.String(length=128), nullable=False),
        sa.Column("since", _UTC, nullable=False),
    )
    connection = op.get_bind()
    rows: dict[str, dict[str, object]] = {}
    drains = connection.execute(
        sa.text("SELECT instance_id, reason, asked_at, drained_at, kind FROM drain_requests")
    )
    for instance_id, reason, asked_at, drained_at, kind in drains:
        rows[instance_id] = {
            "instance_id": instance_id,
            "state": "drained" if drained_at is not None else "draining",
            "reason": reason,
            "since": drained_at or asked_at,
            "drain_kind": kind,
            "drain_reason": reason,
            "drain_asked_at": asked_at,
            "drained_at": drained_at,
        }
    gone = connection.execute(sa.text("SELECT instance_id, gone_at, reason FROM gone_instances"))
    for instance_id, gone_at, reason in gone:
        row = rows.setdefault(instance_id, {"instance_id": instance_id})
        row.update(state="terminated", reason=reason, since=gone_at)
    if rows:
        empty = dict.fromkeys(("drain_kind", "drain_reason", "drain_asked_at", "drained_at"))
        op.bulk_insert(instances, [empty | row for row in rows.values()])
    op.drop_index("ix_gone_instances_gone_at", table_name="gone_instances")
    op.drop_table("gone_instances")
    op.drop_table("drain_requests")


def downgrade() -> None:
    op.create_table(
        "gone_instances",
        sa.Column("instance_id", sa.String(length=64), primary_key=True),
        sa.Column("gone_at", _UTC, nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
    )
    op.create_index("ix_gone_instances_gone_at", "gone_instances", ["gone_at"])
    op.create_table(
        "drain_requests",
        sa.Column("instance_id", sa.String(length=64), primary_key=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("asked_at", _UTC, nullable=False),
        sa.Column("drained_at", _UTC, nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False, server_default="scale-in"),
    )
    op.drop_table("preemption_holds")
    op.drop_index("ix_instance_changes_instance_id", table_name="instance_changes")
    op.drop_table("instance_changes")
    op.drop_index("ix_instances_since", table_name="instances")
    op.drop_index("ix_instances_state", table_name="instances")
    op.drop_table("instances")
