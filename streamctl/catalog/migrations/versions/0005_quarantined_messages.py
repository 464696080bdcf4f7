"""quarantined_messages: messages a pass could not apply, kept for inspection

A message whose application fails for a reason the checks did not foresee is answered with an
``INTERNAL`` error and a reference id, and kept here instead of failing its pass again and
again (DESIGN §3).

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "quarantined_messages",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("message_id", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("reference", sa.String(length=64), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quarantined_messages")),
    )
    op.create_index(
        op.f("ix_quarantined_messages_reference"),
        "quarantined_messages",
        ["reference"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_quarantined_messages_reference"), table_name="quarantined_messages")
    op.drop_table("quarantined_messages")
