"""jobs across nodes, workers inside Slurm allocations

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 02:40:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("nodes", sa.Integer(), server_default="1", nullable=False))
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("multinode", sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column("slurm_job_id", sa.String(length=50), nullable=True))
        batch_op.add_column(sa.Column("slurm_node", sa.String(length=200), nullable=True))
        batch_op.add_column(sa.Column("ends_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_column("ends_at")
        batch_op.drop_column("slurm_node")
        batch_op.drop_column("slurm_job_id")
        batch_op.drop_column("multinode")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("nodes")
