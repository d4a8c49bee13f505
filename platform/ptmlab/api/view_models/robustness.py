"""GET /views/robustness (ptmlab.views.robustness); an attack result per recipe is the compression
view's robustness too."""

from __future__ import annotations

from pydantic import Field

from ptmlab.api.view_models.common import FilterOptions, NamedId, ViewModel


class RecipeAttack(ViewModel):
    """The latest attack result of one recipe on one model."""

    result_id: int
    job_id: int | None
    recipe: str
    clean_accuracy: float | None
    num_examples: int | None
    seed: int | None
    accuracy_under_attack: float | None
    success_rate: float | None
    perturbed_word_ratio: float | None
    queries: float | None
    runs: int = Field(description="results of this recipe on the model")


class RobustnessRecipe(RecipeAttack):
    attack_job: str | None = Field(description="the attack job's name")


class MadeBy(ViewModel):
    stage: str | None
    adaptation: str | None
    defence: str | None
    method: str | None
    text: str


class RobustnessRow(ViewModel):
    source: str
    task: str
    label: str
    job_id: int | None = Field(description="the job that made the attacked model")
    made_by: MadeBy
    clean_accuracy: float | None
    recipes: dict[str, RobustnessRecipe]
    display: str
    same_sample: bool


class RobustnessChart(ViewModel):
    models: list[str]
    clean: list[float | None]
    recipes: dict[str, list[float | None]] = Field(description="accuracy under attack per model")


class RobustnessOptions(FilterOptions):
    pipelines: list[NamedId]


class RobustnessFilters(ViewModel):
    task: str | None
    sweep_id: str | None
    tags: dict[str, str]
    pipeline: NamedId | None


class RobustnessOut(ViewModel):
    rows: list[RobustnessRow]
    recipes: list[str]
    tasks: list[str]
    result_count: int
    chart: RobustnessChart
    options: RobustnessOptions
    filters: RobustnessFilters
