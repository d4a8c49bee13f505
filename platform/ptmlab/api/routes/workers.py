"""/api/v1/workers: registered workers with their last heartbeat."""

from __future__ import annotations

from fastapi import APIRouter

from ptmlab import queue
from ptmlab.api.deps import SessionDep
from ptmlab.api.schemas import WorkerOut
from ptmlab.db import utcnow

router = APIRouter(prefix="/workers", tags=["workers"])


@router.get("", response_model=list[WorkerOut])
def list_workers(session: SessionDep) -> list[dict]:
    now = utcnow()
    return [
        {
            **w.to_dict(),
            "seconds_since_heartbeat": round((now - w.last_heartbeat).total_seconds(), 3) if w.last_heartbeat else None,
        }
        for w in queue.list_workers(session)
    ]
