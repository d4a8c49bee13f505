"""GET /api/v1/sweeps and GET /api/v1/pipelines: one route, declared once, for either kind of group."""

from __future__ import annotations

from fastapi import APIRouter

from ptmlab.api.deps import PageLimit, PageOffset, SessionDep
from ptmlab.api.schemas import GroupPage
from ptmlab.queue.groups import GroupKind, group_page


def add_group_list_route(router: APIRouter, kind: GroupKind, responses: dict) -> None:
    """`GET ""` on `router`: a page of the `kind`s, newest first (named list_<kind>s, as its operation id says)."""

    def list_groups(session: SessionDep, limit: PageLimit = 50, offset: PageOffset = 0) -> dict:
        return group_page(session, kind, limit=limit, offset=offset)

    router.add_api_route(
        "",
        list_groups,
        methods=["GET"],
        name=f"list_{kind}s",
        response_model=GroupPage,
        responses=responses,
        summary=f"{kind.capitalize()}s, newest first, each with its jobs counted by state and its best result",
    )
