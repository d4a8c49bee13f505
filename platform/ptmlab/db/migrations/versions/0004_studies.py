"""hyperparameter studies: the ptmlab_studies table, trials as jobs (study_id, trial_number),
`pruned` as the end of a cancel (jobs.cancel_as), and Optuna's own tables

Optuna's RDB storage is opened with skip_table_creation and skip_compatibility_check
(ptmlab.studies.storage): left to itself it would create its tables and stamp *its* Alembic
revision into the `alembic_version` table this database already uses for ours. So this migration
creates Optuna's tables from the pinned Optuna's models; a new Optuna whose schema changed needs a
new migration here (constraints.txt pins it).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24 19:50:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _optuna_metadata():
    from optuna.storages._rdb import models

    return models.BaseModel.metadata


def upgrade() -> None:
    op.create_table(
        "ptmlab_studies",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("optuna_name", sa.String(length=200), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("stop_reason", sa.Text(), nullable=True),
        sa.Column("driver_id", sa.String(length=200), nullable=True),
        sa.Column("driver_until", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("optuna_name"),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cancel_as", sa.String(length=20), nullable=True))
        batch_op.add_column(sa.Column("study_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("trial_number", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_jobs_study_id"), ["study_id"], unique=False)
        batch_op.create_foreign_key("fk_jobs_study_id", "ptmlab_studies", ["study_id"], ["id"])
    _optuna_metadata().create_all(bind=op.get_bind())


def downgrade() -> None:
    _optuna_metadata().drop_all(bind=op.get_bind())
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_constraint("fk_jobs_study_id", type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_jobs_study_id"))
        batch_op.drop_column("trial_number")
        batch_op.drop_column("study_id")
        batch_op.drop_column("cancel_as")
    op.drop_table("ptmlab_studies")
