"""Full fine-tuning: every backbone parameter and the task head train (Devlin et al. 2019)."""

from lightning_modules.adaptation.base import Adaptation
from ptmlab.methods.adaptation import AdaptationParams


class FullFineTuning(Adaptation):
    declaration = AdaptationParams

    name = "full"
