"""indexes the dashboard's lists read at 100,000 results and 20,000 jobs: the newest results
(overview, `GET /api/v1/results`), the newest jobs of a stage or queue (jobs list filters)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26 06:00:00
"""

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.create_index("ix_results_created", ["created_at", "id"], unique=False)
        batch_op.create_index("ix_results_kind_id", ["kind", "id"], unique=False)
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_stage_id", ["stage", "id"], unique=False)
        batch_op.create_index("ix_jobs_queue_id", ["queue", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_queue_id")
        batch_op.drop_index("ix_jobs_stage_id")
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_index("ix_results_kind_id")
        batch_op.drop_index("ix_results_created")
