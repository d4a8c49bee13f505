"""results rows carry their summary's schema version; the rows stored before are brought to the
current shape once (each value of the wrong type dropped), so readers never patch a row up

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29 10:15:00
"""

from alembic import op

from ptmlab.db.summary_migration import strip_schema_versions, upgrade_stored_summaries

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    upgrade_stored_summaries(op.get_bind())


def downgrade() -> None:
    strip_schema_versions(op.get_bind())
