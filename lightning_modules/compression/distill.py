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

Every task kind distils (compression/soft_targets.py): a token tagger per labelled sub-word, a span
head on its start and end distributions over each window, a generator word-level on each target
token's distribution over the vocabulary; `sequence_level=true` (generation only; Kim & Rush 2016)
trains the student on the teacher's greedy outputs of the training sources instead of the
references (with `kd_weight` > 0 both: the soft targets of those outputs). A generator's student
keeps every k-th layer of its encoder and of its decoder; hidden/attention/embedding losses read
an encoder's states and are refused on a generator. Sentence-level teacher logits for the
training set are computed once and cached on disk (safetensors, keyed by the teacher's weights
hash and the training data), so when only kd/ce are used every epoch runs the student alone; the
per-token logits of the other kinds are the teacher's forward pass on the same batch.
`control=true` (the default) has the stage train the same initial student on the labels alone
(the references, for sequence-level KD too), the same epochs over the same examples, and report
its score beside the distilled one (compression/control.py).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json

import torch
import torch.nn.functional as F
from torch import nn

from lightning_modules.artifacts.structural_edits import droppable_stacks, keep_layers, with_layer_counts
from lightning_modules.compression.base import (
    CompressContext,
    Compressed,
    CompressionMethod,
    copy_model,
    train_epochs,
    train_loader,
)
from lightning_modules.compression.quantize_dynamic import refuse_quantized_source
from lightning_modules.compression.soft_targets import soft_target_loss
from lightning_modules.heads.evaluation import task_loss
from lightning_modules.heads.generation_model import decode_split
from lightning_modules.heads.generation_model_for import generation_model_for
from lightning_modules.heads.pooling import pool
from lightning_modules.heads.task_model import TaskModel
from ptmlab.contracts import ConfigError
from ptmlab.contracts.decoding import DecodingSettings
from ptmlab.methods.compression import DistillParams


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
    declaration = DistillParams
    params: DistillParams  # the validated declaration (CompressionMethod.__init__)

    name = "distill"
    takes_generators = True

    # -- the student --------------------------------------------------------------------------
    def _student_shape(self, source) -> tuple[int, int]:
        """(layers, hidden size) of the student this config asks for."""
        if self.params.student_model:
            b = dict(self.params.student_model.get("backbone") or {})
            return int(b.get("num_layers", 0)), int(b.get("hidden_size", 0))
        return int(self.params.student_layers or 0), int(source.model.backbone.hidden_size)

    def check(self, source, ctx: CompressContext) -> None:

        refuse_quantized_source(source, self.name)
        teacher = source.model.backbone
        n_teacher, w_teacher = int(teacher.num_layers), int(teacher.hidden_size)
        spec = ctx.task.spec
        if self.params.sequence_level and not spec.is_generation:
            raise ConfigError(
                f"compression.sequence_level=true: sequence-level KD trains on a generator's outputs; "
                f"task {spec.name} is {spec.kind}"
            )
        if spec.is_generation:
            for key in ("hidden_weight", "attention_weight", "embedding_weight"):
                if getattr(self.params, key) > 0:
                    raise ConfigError(
                        f"compression.{key}={getattr(self.params, key)}: a generator is distilled on its "
                        f"output distributions (kd_weight, ce_weight); this loss reads an encoder's states"
                    )
            if not self.params.student_model:
                droppable_stacks(teacher)
                n_teacher = min(int(stack.num_layers) for stack in teacher.layer_stacks())
        if self.params.student_model:
            backbone = dict(self.params.student_model.get("backbone") or {})
            if not str(backbone.get("_target_", "")).startswith("lightning_modules.models."):
                raise ConfigError(
                    f"compression.student_model.backbone._target_={backbone.get('_target_')!r}: "
                    f"a student is a lightning_modules.models backbone"
                )
        elif not self.params.student_layers or self.params.student_layers > n_teacher:
            raise ConfigError(
                f"compression.student_layers={self.params.student_layers}: the teacher has {n_teacher} "
                f"layers (a student keeps 1..{n_teacher} of them)"
            )
        n_student, w_student = self._student_shape(source)
        if w_student > w_teacher:
            raise ConfigError(
                f"compression.student_model.backbone.hidden_size={w_student} is wider than the "
                f"teacher ({w_teacher}): the projection maps a narrower student up to the teacher"
            )
        if self.params.hidden_weight > 0 and w_student != w_teacher and not self.params.projection:
            raise ConfigError(
                f"compression.projection=false: student width {w_student} differs from the "
                f"teacher's {w_teacher}; hidden-state MSE needs the projection"
            )
        for pair in self.params.layer_map or []:
            if len(pair) != 2:
                raise ConfigError(f"compression.layer_map entry {pair}: expected [student layer, teacher layer]")
            s, t = pair
            if not 0 <= s <= n_student:
                raise ConfigError(
                    f"compression.layer_map: student layer {s} does not exist (the student has "
                    f"layers 1..{n_student}, 0 = embeddings)"
                )
            if not 0 <= t <= n_teacher:
                raise ConfigError(
                    f"compression.layer_map: teacher layer {t} does not exist (the teacher has "
                    f"layers 1..{n_teacher}, 0 = embeddings)"
                )

    def build_student(self, source) -> tuple[nn.Module, dict]:
        if not self.params.student_model:
            student = copy_model(source)
            for stack in student.backbone.layer_stacks():  # an encoder–decoder: each side alike
                keep_layers(stack, every_kth(self.params.student_layers, int(stack.num_layers)))
            return student, with_layer_counts(source.manifest["model"], student.backbone)
        from hydra.utils import instantiate

        node = json.loads(json.dumps(self.params.student_model))
        node["backbone"]["vocab_size"] = len(source.tokenizer)
        backbone = instantiate(node["backbone"])
        ((task_name, size),) = source.model.head_sizes.items()
        head_dropout = float(source.manifest["head_dropout"])
        spec = source.tasks[task_name]
        if spec.is_generation:  # the teacher's kind of generator head on the student's backbone
            student = generation_model_for(
                backbone,
                task_name=task_name,
                head_dropout=head_dropout,
                max_target_length=spec.max_target_length,
                source_prefix=spec.source_prefix,
            )
        else:
            student = TaskModel(
                backbone, size, pooling=source.model.pooling, head_dropout=head_dropout, task_name=task_name
            )
        return student, {
            "name": str(node.get("name", "student")),
            "family": str(node.get("family", "transformer")),
            "backbone": node["backbone"],
        }

    # -- teacher logits, cached ---------------------------------------------------------------
    @torch.no_grad()
    def teacher_logits(self, source, ctx: CompressContext) -> torch.Tensor | None:
        """N×C logits of the teacher for the train split in example order (cached on disk); None
        for a per-token head (token, span, generation): the teacher then runs on each batch."""
        spec = ctx.task.spec
        if spec.is_token_level or spec.is_span_level or spec.is_generation:
            return None
        from safetensors.torch import load_file, save_file

        split = ctx.task.data.splits[ctx.task.data.train_split]
        texts = hashlib.sha256()
        for ex in split.examples:
            texts.update(repr(ex).encode())
        texts.update(str(ctx.task.spec.max_length).encode())
        key = hashlib.sha256((source.manifest["weights"].get("sha256", "") + texts.hexdigest()).encode()).hexdigest()[
            :32
        ]
        path = ctx.cache_dir / "teacher_logits" / f"{key}.safetensors" if ctx.cache_dir is not None else None
        if self.params.cache_logits and path is not None and path.is_file():
            return load_file(str(path))["logits"]
        out = torch.zeros(len(split.examples), max(source.model.head_sizes.values()))
        teacher = source.model.eval()
        for batch in train_loader(ctx, teacher, source.tokenizer, shuffle=False):
            out[batch["example_index"]] = teacher(batch).float()
        if self.params.cache_logits and path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            save_file({"logits": out.contiguous()}, str(tmp))
            tmp.replace(path)
        return out

    # -- the loss -----------------------------------------------------------------------------
    def _loss_fn(self, teacher: nn.Module, cached: torch.Tensor, spec, layer_map, projections: nn.ModuleDict):
        needs_teacher_states = (
            self.params.hidden_weight > 0 or self.params.attention_weight > 0 or self.params.embedding_weight > 0
        )

        def forward(model, batch, attentions: bool):
            if spec.is_generation:  # the generator's own forward (encoder–decoder, prompt, Hugging Face LM)
                return model(batch), None
            out = model.backbone(
                batch["input_ids"],
                attention_mask=batch["attention_mask"],
                token_type_ids=batch.get("token_type_ids"),
                output_attentions=attentions,
            )
            logits = model.head(pool(out.last_hidden_state, batch, model.pooling))
            return logits, out

        def loss_fn(model, batch):
            need_att = self.params.attention_weight > 0
            s_logits, s_out = forward(model, batch, need_att)
            if needs_teacher_states or cached is None:
                with torch.no_grad():
                    t_logits, t_out = forward(teacher, batch, need_att)
            else:
                t_logits = cached[batch["example_index"]].to(s_logits.dtype)
            parts = {}
            if self.params.kd_weight > 0:
                parts["kd"] = soft_target_loss(spec, s_logits, t_logits, batch, self.params.temperature)
            if self.params.ce_weight > 0:
                parts["ce"] = task_loss(spec, s_logits, batch["labels"])
            if self.params.hidden_weight > 0:
                mse = [
                    F.mse_loss(projections[f"{s}_{t}"](s_out.hidden_states[s]), t_out.hidden_states[t])
                    for s, t in layer_map
                ]
                parts["hidden"] = torch.stack(mse).mean()
            if self.params.attention_weight > 0:
                kls = []
                for s_att, t_att in zip(
                    s_out.attentions[-self.params.attention_layers :], t_out.attentions[-self.params.attention_layers :]
                ):
                    if s_att.shape[1] != t_att.shape[1]:  # B×heads×T×T: compare head-averaged maps
                        s_att, t_att = s_att.mean(1, keepdim=True), t_att.mean(1, keepdim=True)
                    kls.append((t_att * (t_att.clamp_min(1e-9).log() - s_att.clamp_min(1e-9).log())).sum(-1).mean())
                parts["attention"] = torch.stack(kls).mean()
            if self.params.embedding_weight > 0:
                s_emb, t_emb = projections["0_0"](s_out.hidden_states[0]), t_out.hidden_states[0]
                parts["embedding"] = (
                    F.mse_loss(s_emb, t_emb)
                    if self.params.embedding_loss == "mse"
                    else (1 - F.cosine_similarity(s_emb, t_emb, dim=-1)).mean()
                )
            weights = {
                "kd": self.params.kd_weight,
                "ce": self.params.ce_weight,
                "hidden": self.params.hidden_weight,
                "attention": self.params.attention_weight,
                "embedding": self.params.embedding_weight,
            }
            loss = sum(weights[k] * v for k, v in parts.items())
            return loss, {k: v.detach() for k, v in parts.items()}

        return loss_fn

    def compress(self, source, ctx: CompressContext) -> Compressed:
        teacher = source.model.eval()
        teacher.requires_grad_(False)
        student, model_cfg = self.build_student(source)
        initial = copy.deepcopy(student) if self.params.control else None
        n_student, w_student = int(student.backbone.num_layers), int(student.backbone.hidden_size)
        w_teacher = int(teacher.backbone.hidden_size)
        layer_map = self.params.layer_map or default_layer_map(n_student, int(teacher.backbone.num_layers))
        pairs = [tuple(p) for p in layer_map] + ([(0, 0)] if self.params.embedding_weight > 0 else [])
        projections = nn.ModuleDict(
            {
                f"{s}_{t}": (nn.Linear(w_student, w_teacher) if w_student != w_teacher else nn.Identity())
                for s, t in pairs
            }
        )
        cached = self.teacher_logits(source, ctx)
        loss_fn = self._loss_fn(teacher, cached, ctx.task.spec, layer_map, projections)
        named_params = [*student.named_parameters(), *projections.named_parameters(prefix="projections")]
        numbers = {}
        taught = ctx
        if self.params.sequence_level:
            taught = dataclasses.replace(ctx, task=teacher_output_task(source, ctx))
            pairs = zip(
                ctx.task.data.splits[ctx.task.data.train_split].examples,
                taught.task.data.splits[taught.task.data.train_split].examples,
            )
            changed = sum(gold.label[0] != out.label[0] for gold, out in pairs)
            numbers.update(
                sequence_level_targets=len(taught.task.data.splits[taught.task.data.train_split].examples),
                sequence_level_changed_targets=changed,
            )  # outputs that are not the first reference
        trained = train_epochs(
            student,
            source.tokenizer,
            taught,
            epochs=self.params.epochs,
            lr=self.params.lr,
            loss_fn=loss_fn,
            prefix="distill",
            named_params=named_params,
        )
        teacher.requires_grad_(True)
        numbers.update(
            {
                "student_layers": n_student,
                "student_hidden_size": w_student,
                "layer_map": layer_map,
                "distill_steps": trained["steps"],
                "train_time_s": trained["train_time_s"],
            }
        )
        if ctx.task.spec.is_generation:
            numbers["student_decoder_layers"] = int(getattr(student.backbone, "num_decoder_layers", n_student))
        # the control is the student before the teacher taught it (the source would not be one)
        return Compressed(student, [], numbers, model_cfg=model_cfg, training=[trained], control_start=initial)


def teacher_output_task(source, ctx: CompressContext):
    """The task with its training targets replaced by the teacher's outputs for the training sources,
    decoded greedily (sequence-level KD; the eval splits keep their references)."""
    task = ctx.task
    split = task.data.splits[task.data.train_split]
    greedy = DecodingSettings.from_dict({**dict(task.spec.generation), "strategy": "greedy", "num_beams": 1})
    outputs = decode_split(
        source.model, source.tokenizer, task, split.name, greedy, batch_size=ctx.eval_batch_size
    ).outputs
    examples = [dataclasses.replace(ex, label=(out,)) for ex, out in zip(split.examples, outputs)]
    splits = {**task.data.splits, split.name: dataclasses.replace(split, examples=examples)}
    return dataclasses.replace(task, data=dataclasses.replace(task.data, splits=splits))
