"""Prompt-based fine-tuning (PET, Schick & Schütze 2021; LM-BFF, Gao et al. 2021) and zero-shot
prompting: the task's template (task.prompt.template) turns each example into a cloze, and the
backbone's own LM head (adaptation/lm_head.py) scores each label's verbalizer words at the slot
(tasks/templates.py). The head is `Dropout -> VerbalizerHead`, so the label logits keep the shape
(B×C) every other mode gives and the stage needs no special case.

    prompt_finetune    everything trains (freeze_backbone=false) or only the LM head
    prompt_zero_shot   nothing trains: the pre-trained model as it is (trains = False)

What `insert_modules` needs to rebuild the model when a saved task model is loaded (template,
verbalizer, label token ids, LM head spec, demonstrations) is in the saved node's `resolved`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from lightning_modules.adaptation.base import Adaptation, set_trainable
from lightning_modules.adaptation.lm_head import VerbalizerHead, build_lm_head, find_lm_head
from lightning_modules.tasks.templates import PromptTemplate, draw_demonstrations, resolve_label_words, template_fields
from ptmlab.contracts import ConfigError
from ptmlab.methods.adaptation import PromptBasedParams


def _plain(value):
    """Hydra hands nested nodes over as DictConfig/ListConfig; `resolved` is kept as JSON."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig | ListConfig) else value


class PromptBasedFineTuning(Adaptation):
    declaration = PromptBasedParams

    name = "prompt_finetune"

    takes_declaration = True

    def __init__(self, params: PromptBasedParams | None = None, resolved: dict | None = None, **values: Any):
        self.params = self.declared_params(params, values)
        self.freeze_backbone, self.demonstrations = self.params.freeze_backbone, self.params.demonstrations
        # {template, verbalizer, label_token_ids, lm_head, demonstrations}: set by bind(), or read
        # back from a saved task model's manifest.
        self.resolved = _plain(resolved)
        self.lm_head_state: dict[str, torch.Tensor] | None = None  # the pre-trained head's weights

    def bind(self, task, resolved) -> None:
        spec, mode = task.spec, self.name
        if spec.prompt is None:
            raise ConfigError(
                f"adaptation={mode} needs task.prompt (a template and a verbalizer); task {spec.name} has none"
            )
        if spec.is_regression:
            raise ConfigError(f"adaptation={mode} needs a classification task; task {spec.name} is a regression task")
        template = spec.prompt["template"]
        fields = template_fields(template)
        num_texts = len(task.train.examples[0].texts)
        if num_texts != len(fields):
            raise ConfigError(
                f"task.prompt.template={template!r} has fields {', '.join(fields)} but task "
                f"{spec.name} has {num_texts} text field(s)"
            )
        label_token_ids = resolve_label_words(spec.prompt["verbalizer"], spec.labels, resolved.tokenizer, template)
        lm_head, self.lm_head_state = find_lm_head(resolved, mode)
        if self.freeze_backbone and lm_head["kind"] == "causal":
            raise ConfigError(
                f"adaptation.freeze_backbone=true trains only the LM head, and the causal decoder "
                f"of backbone={resolved.source} has none apart from its tied embedding"
            )
        # Drawn once, with the run's seed (build_finetune seeds torch before bind), not per example.
        demonstrations = (
            draw_demonstrations(task.train.examples, spec.num_labels, self.demonstrations, seed=torch.initial_seed())
            if self.demonstrations
            else []
        )
        self.resolved = {
            "template": template,
            "verbalizer": spec.prompt["verbalizer"],
            "label_token_ids": label_token_ids,
            "lm_head": lm_head,
            "demonstrations": demonstrations,
        }

    def _template(self) -> PromptTemplate:
        r = self.resolved
        return PromptTemplate(r["template"], [list(ids) for ids in r["label_token_ids"]], list(r["demonstrations"]))

    def insert_modules(self, model: nn.Module) -> None:
        if self.resolved is None:
            raise ConfigError(
                f"adaptation={self.name}: no resolved prompt (bind() was not called and the node has no `resolved`)"
            )
        if model.pooling != "pool_index":
            raise ConfigError(
                f"adaptation={self.name} reads the [MASK] slot: stage.pooling must be pool_index, not {model.pooling}"
            )
        dropout = model.head[0].p
        backbone = model.backbone
        verbalizer = VerbalizerHead(
            build_lm_head(self.resolved["lm_head"]), self.resolved["label_token_ids"], backbone.get_input_embeddings
        )
        model.head = nn.Sequential(nn.Dropout(dropout), verbalizer)
        model.input_template = self._template()

    def prepare(self, model: nn.Module) -> None:
        self.insert_modules(model)
        lm_head = model.head[-1].lm_head
        if lm_head is not None and self.lm_head_state is not None:
            lm_head.load_state_dict(self.lm_head_state)
        if self.freeze_backbone:
            set_trainable([model], False)
            set_trainable([lm_head], True)
            model.freeze_backbone_mode = True  # no dropout in the frozen backbone
        else:
            set_trainable([model], True)

    def saved_node(self, node: dict) -> dict:
        return {**node, "resolved": self.resolved}

    def delta_state(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """What trained, plus the LM head: inserted from the pre-training export, it is stored per
        task even when it stays fixed (zero-shot)."""
        state = super().delta_state(model)
        state.update({f"head.{k}": v.detach() for k, v in model.head.named_parameters()})
        return state


class ZeroShotPrompting(PromptBasedFineTuning):
    declaration = PromptBasedParams

    name = "prompt_zero_shot"
    trains = False

    def __init__(self, params: PromptBasedParams | None = None, resolved: dict | None = None, **values: Any):
        super().__init__(params, resolved, **values)
        self.freeze_backbone = False  # nothing trains

    def prepare(self, model: nn.Module) -> None:
        super().prepare(model)
        set_trainable([model], False)
