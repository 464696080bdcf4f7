"""explanations: Spark's plans asked from agents for EXPLAIN

An ``EXPLAIN`` is answered in its pass with the bound plan and the placement; Spark's own plan
comes from the agent the query would run on, later, into this table (``GetExplanation``).

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "explanations",
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("agent", sa.String(length=128), nullable=False),
        sa.Column("spark_plan", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_version", sa.BigInteger(), nullable=False),
        sa.Column("updated_version", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_explanations")),
    )


def downgrade() -> None:
    op.drop_table("explanations")
