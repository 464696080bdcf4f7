"""changelog without per-row checks

The changelog's foreign key to ``snapshot_versions`` made PostgreSQL run a referential check
for every changelog row, most of the time a pass spent writing its changelog; its index on
``version`` repeats the prefix of the unique ``(version, seq)`` index. The pass activity, the
catalog's single writer, inserts a pass's snapshot version and its changelog in one
transaction, which is what the key guarded.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("changelog", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_changelog_version"))
        batch_op.drop_constraint(
            batch_op.f("fk_changelog_version_snapshot_versions"), type_="foreignkey"
        )


def downgrade() -> None:
    with op.batch_alter_table("changelog", schema=None) as batch_op:
        batch_op.create_foreign_key(
            batch_op.f("fk_changelog_version_snapshot_versions"),
            "snapshot_versions",
            ["version"],
            ["version"],
        )
        batch_op.create_index(batch_op.f("ix_changelog_version"), ["version"], unique=False)
