"""where a job (and a study, whose trials are jobs) came from: the API, or the researcher's own
machine (CLI, launcher, scripts); a worker re-applies the API's checks to what the API queued

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28 18:00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain ADD COLUMN (SQLite has it): a batch copy would drop and recreate ptmlab_studies, which
    # jobs reference, and SQLite refuses that with foreign keys on and studies stored.
    for table in ("jobs", "ptmlab_studies"):
        op.add_column(table, sa.Column("submitted_remotely", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    for table in ("jobs", "ptmlab_studies"):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column("submitted_remotely")
