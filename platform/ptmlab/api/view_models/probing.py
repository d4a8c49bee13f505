"""GET /views/probing (ptmlab.views.probing)."""

from __future__ import annotations

from pydantic import Field

from ptmlab.api.view_models.common import FilterOptions, ViewFilters, ViewModel

Series = list[float | None] | None


class ProbeCurve(ViewModel):
    """A model × probe task: per layer the mean (and sample std) over its runs of each metric any
    layer recorded; a metric none recorded is absent."""

    model: str
    probe_task: str
    result_ids: list[int]
    runs: int
    layers: list[int]
    accuracy: Series = None
    accuracy_std: Series = None
    control_accuracy: Series = None
    control_accuracy_std: Series = None
    selectivity: Series = None
    selectivity_std: Series = None
    uuas: Series = None
    uuas_std: Series = None
    spearman: Series = None
    spearman_std: Series = None
    root_accuracy: Series = None
    root_accuracy_std: Series = None
    anisotropy: Series = None
    anisotropy_std: Series = None
    self_similarity: Series = None
    self_similarity_std: Series = None
    self_similarity_adjusted: Series = None
    self_similarity_adjusted_std: Series = None
    intra_sentence_similarity: Series = None
    intra_sentence_similarity_std: Series = None
    intra_sentence_similarity_adjusted: Series = None
    intra_sentence_similarity_adjusted_std: Series = None


class ProbeHeatmap(ViewModel):
    model: str
    probe_task: str
    result_id: int
    statistic: str
    values: list[list[float | None]] = Field(description="[layer][head]")


class ClozeRow(ViewModel):
    model: str
    result_id: int
    relation: str
    p_at_1: float | None
    p_at_10: float | None
    mrr: float | None
    facts: float | None
    oov: float | None
    scored: float | None


class ProbingOut(ViewModel):
    models: list[str]
    probe_tasks: list[str]
    curves: list[ProbeCurve]
    heatmaps: list[ProbeHeatmap]
    statistics: list[str]
    cloze: list[ClozeRow]
    result_count: int
    options: FilterOptions
    filters: ViewFilters
