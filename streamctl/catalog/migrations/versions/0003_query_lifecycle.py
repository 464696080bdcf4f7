"""query lifecycle columns

What the coordinator needs to run a query on an agent and to restart it: the bound plan, how
many times it was started (``run``, which tells a report from an earlier placement apart), its
restart count and when it may start again, when it last became RUNNING, its latest progress
(``Statistics`` from its agent, and when they came), and the actions each
pass decided (so a replayed pass hands them out again). An index on ``current_state`` keeps the
per-pass lookup of queries waiting for an agent cheap.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("queries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("plan", sa.Text(), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("run", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("restarts", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("retry_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("started_at", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("statistics", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("statistics_at", sa.Float(), nullable=True))
        batch_op.create_index(batch_op.f("ix_queries_current_state"), ["current_state"])
    with op.batch_alter_table("snapshot_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("actions", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("snapshot_versions", schema=None) as batch_op:
        batch_op.drop_column("actions")
    with op.batch_alter_table("queries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_queries_current_state"))
        for column in (
            "statistics_at",
            "statistics",
            "started_at",
            "retry_at",
            "restarts",
            "run",
            "plan",
        ):
            batch_op.drop_column(column)
