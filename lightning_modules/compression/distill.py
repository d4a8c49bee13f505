"""Task-specific knowledge distillation from the fine-tuned source (the teacher) into a student.

The student is either initialised from every k-th teacher layer (`student_layers`: DistilBERT/
PKD style; the teacher's embeddings and head are copied too), or built from any model node
(`student_model`: a smaller ptmlab Transformer, an ALBERT-style shared-layer one, ...; random
init, the teacher's tokenizer). Losses, each with a weight, summed:

    kd         soft-target KL(teacher/T ‖ student/T) · T² (Hinton et al.; the T² keeps its gradient
               scale independent of T); MSE of the logits for a regression task
    ce         the task loss on the gold labels
    hidden     MSE between mapped hidden states (`layer_map`, [[student, teacher], ...], 1-based
               layer outputs, 0 = the embedding output), through a learned linear projection when
               the widths differ (PKD/TinyBERT); default map: student layer i ↔ teacher layer i·k
    attention  KL between the attention distributions of the last `attention_layers` layers
               (MiniLM; averaged over heads when the head counts differ)
    embedding  MSE or cosine distance between the embedding outputs (DistilBERT)

Teacher logits for the training set are computed once and cached on disk (safetensors, keyed by
the teacher's weights hash and the training data), so when only kd/ce are used every epoch runs
the student alone. `control=true` (the default) has the stage train the same initial student on
the labels alone, the same epochs over the same examples, and report its score beside the
distilled one (compression/control.py).
"""

from __future__ import annotations

import copy
import hashlib
import json

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.artifacts.structural_edits import keep_layers
from lightning_modules.compression.base import CompressContext, Compressed, CompressionMethod, copy_model, \
    train_epochs, train_loader
from lightning_modules.compression.quantize_dynamic import refuse_quantized_source
from lightning_modules.heads.evaluation import task_loss
from lightning_modules.heads.pooling import pool
from lightning_modules.heads.task_model import TaskModel
from ptmlab.contracts import ConfigError


def default_layer_map(student_layers: int, teacher_layers: int) -> list[list[int]]:
    """Student layer i ↔ teacher layer i·k (k = teacher ÷ student, rounded down), 1-based."""
    k = max(1, teacher_layers // student_layers)
    return [[i, min(i * k, teacher_layers)] for i in range(1, student_layers + 1)]


def every_kth(student_layers: int, teacher_layers: int) -> list[int]:
    k = max(1, teacher_layers // student_layers)
    return [i * k for i in range(student_layers)]


def with_num_layers(model_node: dict, n: int) -> dict:
    node = json.loads(json.dumps(model_node))
    backbone = node.get("backbone", {})
    if "num_layers" in backbone:
        backbone["num_layers"] = n
    return node


class Distill(CompressionMethod):
    name = "distill"

    def __init__(self, student_layers: int | None = 3, student_model: dict | None = None, epochs: int = 2,
                 temperature: float = 2.0, kd_weight: float = 0.5, ce_weight: float = 0.5,
                 hidden_weight: float = 0.0, attention_weight: float = 0.0, embedding_weight: float = 0.0,
                 embedding_loss: str = "mse", layer_map: list | None = None, projection: bool = True,
                 attention_layers: int = 1, cache_logits: bool = True, control: bool = True,
                 finetune_epochs: int = 0, lr: float | None = None):
        super().__init__(finetune_epochs=finetune_epochs, lr=lr)
        self.student_layers = None if student_layers is None else int(student_layers)
        self.student_model = student_model
        self.epochs, self.temperature = int(epochs), float(temperature)
        self.kd_weight, self.ce_weight = float(kd_weight), float(ce_weight)
        self.hidden_weight, self.attention_weight = float(hidden_weight), float(attention_weight)
        self.embedding_weight, self.embedding_loss = float(embedding_weight), str(embedding_loss)
        self.layer_map = [list(map(int, pair)) for pair in layer_map] if layer_map else None
        self.projection, self.attention_layers = bool(projection), int(attention_layers)
        self.cache_logits, self.control = bool(cache_logits), bool(control)

    # -- the student --------------------------------------------------------------------------
    def _student_shape(self, source) -> tuple[int, int]:
        """(layers, hidden size) of the student this config asks for."""
        if self.student_model:
            b = dict(self.student_model.get("backbone") or {})
            return int(b.get("num_layers", 0)), int(b.get("hidden_size", 0))
        return int(self.student_layers or 0), int(source.model.backbone.hidden_size)

    def check(self, source, ctx: CompressContext) -> None:

        refuse_quantized_source(source, self.name)
        teacher = source.model.backbone
        n_teacher, w_teacher = int(teacher.num_layers), int(teacher.hidden_size)
        if self.student_model:
            backbone = dict(self.student_model.get("backbone") or {})
            if not str(backbone.get("_target_", "")).startswith("lightning_modules.models."):
                raise ConfigError(f"compression.student_model.backbone._target_={backbone.get('_target_')!r}: "
                                  f"a student is a lightning_modules.models backbone")
        elif not self.student_layers or self.student_layers > n_teacher:
            raise ConfigError(f"compression.student_layers={self.student_layers}: the teacher has {n_teacher} "
                              f"layers (a student keeps 1..{n_teacher} of them)")
        n_student, w_student = self._student_shape(source)
        if w_student > w_teacher:
            raise ConfigError(f"compression.student_model.backbone.hidden_size={w_student} is wider than the "
                              f"teacher ({w_teacher}): the projection maps a narrower student up to the teacher")
        if self.hidden_weight > 0 and w_student != w_teacher and not self.projection:
            raise ConfigError(f"compression.projection=false: student width {w_student} differs from the "
                              f"teacher's {w_teacher}; hidden-state MSE needs the projection")
        for pair in self.layer_map or []:
            if len(pair) != 2:
                raise ConfigError(f"compression.layer_map entry {pair}: expected [student layer, teacher layer]")
            s, t = pair
            if not 0 <= s <= n_student:
                raise ConfigError(f"compression.layer_map: student layer {s} does not exist (the student has "
                                  f"layers 1..{n_student}, 0 = embeddings)")
            if not 0 <= t <= n_teacher:
                raise ConfigError(f"compression.layer_map: teacher layer {t} does not exist (the teacher has "
                                  f"layers 1..{n_teacher}, 0 = embeddings)")
        if self.epochs < 1:
            raise ConfigError(f"compression.epochs={self.epochs}: distillation trains at least one epoch")

    def build_student(self, source) -> tuple[nn.Module, dict]:
        if not self.student_model:
            student = copy_model(source)
            n = int(student.backbone.num_layers)
            keep_layers(student.backbone, every_kth(self.student_layers, n))
            return student, with_num_layers(source.manifest["model"], self.student_layers)
        from hydra.utils import instantiate

        node = json.loads(json.dumps(self.student_model))
        node["backbone"]["vocab_size"] = len(source.tokenizer)
        backbone = instantiate(node["backbone"])
        (task_name, size), = source.model.head_sizes.items()
        student = TaskModel(backbone, size, pooling=source.model.pooling,
                            head_dropout=float(source.manifest["head_dropout"]), task_name=task_name)
        return student, {"name": str(node.get("name", "student")), "family": str(node.get("family", "transformer")),
                         "backbone": node["backbone"]}

    # -- teacher logits, cached ---------------------------------------------------------------
    @torch.no_grad()
    def teacher_logits(self, source, ctx: CompressContext) -> torch.Tensor:
        """N×C logits of the teacher for the train split in example order (cached on disk)."""
        from safetensors.torch import load_file, save_file

        split = ctx.task.data.splits[ctx.task.data.train_split]
        texts = hashlib.sha256()
        for ex in split.examples:
            texts.update(repr(ex).encode())
        texts.update(str(ctx.task.spec.max_length).encode())
        key = hashlib.sha256((source.manifest["weights"].get("sha256", "") + texts.hexdigest()).encode()).hexdigest()[:32]
        path = ctx.cache_dir / "teacher_logits" / f"{key}.safetensors" if ctx.cache_dir is not None else None
        if self.cache_logits and path is not None and path.is_file():
            return load_file(str(path))["logits"]
        out = torch.zeros(len(split.examples), max(source.model.head_sizes.values()))
        teacher = source.model.eval()
        for batch in train_loader(ctx, source.tokenizer, bool(teacher.backbone.is_causal), shuffle=False):
            out[batch["example_index"]] = teacher(batch).float()
        if self.cache_logits and path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            save_file({"logits": out.contiguous()}, str(tmp))
            tmp.replace(path)
        return out

    # -- the loss -----------------------------------------------------------------------------
    def _loss_fn(self, teacher: nn.Module, cached: torch.Tensor, spec, layer_map, projections: nn.ModuleDict):
        T = self.temperature
        needs_teacher_states = self.hidden_weight > 0 or self.attention_weight > 0 or self.embedding_weight > 0

        def forward(model, batch, attentions: bool):
            out = model.backbone(batch["input_ids"], attention_mask=batch["attention_mask"],
                                 token_type_ids=batch.get("token_type_ids"), output_attentions=attentions)
            logits = model.head(pool(out.last_hidden_state, batch, model.pooling))
            return logits, out

        def loss_fn(model, batch):
            need_att = self.attention_weight > 0
            s_logits, s_out = forward(model, batch, need_att)
            t_logits = cached[batch["example_index"]].to(s_logits.dtype)
            if needs_teacher_states:
                with torch.no_grad():
                    t_logits, t_out = forward(teacher, batch, need_att)
            parts = {}
            if self.kd_weight > 0:
                if spec.is_regression:
                    parts["kd"] = F.mse_loss(s_logits.squeeze(-1), t_logits.squeeze(-1))
                else:
                    parts["kd"] = F.kl_div(F.log_softmax(s_logits / T, -1), F.softmax(t_logits / T, -1),
                                           reduction="batchmean") * T * T
            if self.ce_weight > 0:
                parts["ce"] = task_loss(spec, s_logits, batch["labels"])
            if self.hidden_weight > 0:
                mse = [F.mse_loss(projections[f"{s}_{t}"](s_out.hidden_states[s]), t_out.hidden_states[t])
                       for s, t in layer_map]
                parts["hidden"] = torch.stack(mse).mean()
            if self.attention_weight > 0:
                kls = []
                for s_att, t_att in zip(s_out.attentions[-self.attention_layers:], t_out.attentions[-self.attention_layers:]):
                    if s_att.shape[1] != t_att.shape[1]:  # B×heads×T×T: compare head-averaged maps
                        s_att, t_att = s_att.mean(1, keepdim=True), t_att.mean(1, keepdim=True)
                    kls.append((t_att * (t_att.clamp_min(1e-9).log() - s_att.clamp_min(1e-9).log())).sum(-1).mean())
                parts["attention"] = torch.stack(kls).mean()
            if self.embedding_weight > 0:
                s_emb, t_emb = projections["0_0"](s_out.hidden_states[0]), t_out.hidden_states[0]
                parts["embedding"] = (F.mse_loss(s_emb, t_emb) if self.embedding_loss == "mse"
                                      else (1 - F.cosine_similarity(s_emb, t_emb, dim=-1)).mean())
            weights = {"kd": self.kd_weight, "ce": self.ce_weight, "hidden": self.hidden_weight,
                       "attention": self.attention_weight, "embedding": self.embedding_weight}
            loss = sum(weights[k] * v for k, v in parts.items())
            return loss, {k: v.detach() for k, v in parts.items()}

        return loss_fn

    def compress(self, source, ctx: CompressContext) -> Compressed:
        teacher = source.model.eval()
        teacher.requires_grad_(False)
        student, model_cfg = self.build_student(source)
        initial = copy.deepcopy(student) if self.control else None
        n_student, w_student = int(student.backbone.num_layers), int(student.backbone.hidden_size)
        w_teacher = int(teacher.backbone.hidden_size)
        layer_map = self.layer_map or default_layer_map(n_student, int(teacher.backbone.num_layers))
        pairs = [tuple(p) for p in layer_map] + ([(0, 0)] if self.embedding_weight > 0 else [])
        projections = nn.ModuleDict({
            f"{s}_{t}": (nn.Linear(w_student, w_teacher) if w_student != w_teacher else nn.Identity())
            for s, t in pairs})
        cached = self.teacher_logits(source, ctx)
        loss_fn = self._loss_fn(teacher, cached, ctx.task.spec, layer_map, projections)
        params = [p for p in student.parameters()] + [p for p in projections.parameters()]
        trained = train_epochs(student, source.tokenizer, ctx, epochs=self.epochs, lr=self.lr, loss_fn=loss_fn,
                               prefix="distill", params=params)
        teacher.requires_grad_(True)
        numbers = {"student_layers": n_student, "student_hidden_size": w_student, "layer_map": layer_map,
                   "distill_steps": trained["steps"], "train_time_s": trained["train_time_s"]}
        # the control is the student before the teacher taught it (the source would not be one)
        return Compressed(student, [], numbers, model_cfg=model_cfg, training=[trained], control_start=initial)
