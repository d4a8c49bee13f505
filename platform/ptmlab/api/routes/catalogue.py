"""/api/v1/catalogue: config groups and their options, the defaults of conf/config.yaml, which
groups each stage reads, and the pipelines (for the dashboard's submit form)."""

from __future__ import annotations

from fastapi import APIRouter
from omegaconf import OmegaConf

from ptmlab.api.schemas import CatalogueOut

router = APIRouter(prefix="/catalogue", tags=["catalogue"])

# Which config groups a stage reads (the form shows only those). Stages not listed read them all.
STAGE_GROUPS: dict[str, list[str]] = {
    "pretrain": ["model", "objective", "data", "tokenizer", "trainer", "optimizer", "scheduler", "experiment"],
    "finetune": [
        "model",
        "task",
        "adaptation",
        "recipe",
        "tokenizer",
        "trainer",
        "optimizer",
        "scheduler",
        "experiment",
    ],
    "sleep": [],
}


def config_defaults() -> dict[str, str | None]:
    from ptmlab.config import CONF_DIR

    defaults: dict[str, str | None] = {}
    for entry in OmegaConf.to_container(OmegaConf.load(CONF_DIR / "config.yaml")).get("defaults", []):
        if isinstance(entry, dict):
            for group, option in entry.items():
                defaults[str(group)] = None if option is None else str(option)
    return defaults


@router.get("", response_model=CatalogueOut)
def catalogue() -> dict:
    from ptmlab.config import list_config_groups
    from ptmlab.queue.pipelines import list_pipelines

    groups = list_config_groups()
    stages = {s: STAGE_GROUPS.get(s, sorted(g for g in groups if g != "stage")) for s in groups.get("stage", [])}
    return {"groups": groups, "defaults": config_defaults(), "stages": stages, "pipelines": list_pipelines()}
