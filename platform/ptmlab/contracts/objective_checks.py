"""Compose-time checks of the `objective` node against the data (torch-free: the API validates
submissions with it). Listed in `ptmlab.config.CHECKS`.

An objective yaml may declare `requires_data: {<data key>: <value>, ...}`: sentence-pair
objectives need `data.construction=segment_pairs` with the right `data.pair_negative`, TLM needs
`data.name=parallel_text`. The data configs default their construction to what the objective
requires, so this fires only when an explicit override contradicts it.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from ptmlab.contracts.errors import ConfigError

PAIR_NEGATIVES = ("random_document", "swap", "none")


def check_objective_data(cfg: DictConfig) -> None:
    objective, data = cfg.get("objective"), cfg.get("data")
    if not isinstance(objective, DictConfig) or not isinstance(data, DictConfig):
        return
    negative = OmegaConf.select(cfg, "data.pair_negative", default=None)
    if negative is not None and str(negative) not in PAIR_NEGATIVES:
        raise ConfigError(f"data.pair_negative={negative} is unknown; valid: {', '.join(PAIR_NEGATIVES)}")
    required = objective.get("requires_data") if "requires_data" in objective else None
    if not required:
        return
    name = objective.get("name", "?")
    for key, wanted in required.items():
        actual = OmegaConf.select(cfg, f"data.{key}", default=None)
        if str(actual) != str(wanted):
            raise ConfigError(
                f"objective={name} needs data.{key}={wanted}, but data.{key}={actual}"
                + (" (use data=parallel_text)" if key == "name" else "")
            )
