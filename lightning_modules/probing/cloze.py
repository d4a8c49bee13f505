"""Cloze knowledge probes (LAMA, Petroni et al., 2019) for models with a masked-LM head.

Data: LAMA's jsonl files as released (data.zip: `data/relations.jsonl` above `data/TREx/P19.jsonl`
..., `data/Google_RE/place_of_birth_test.jsonl` ..., `data/Squad/test.jsonl`,
`data/ConceptNet/test.jsonl`), or files in the same record shapes: `probe.data.path` is one file
or a folder, read recursively. Each record is one fact, `obj_label` its object:

    T-REx       sub_label, obj_label, predicate_id (the relation), evidences[].masked_sentence
    Google-RE   pred (/people/person/place_of_birth: the relation is its last part), sub_label,
                obj_label, masked_sentences
    SQuAD       masked_sentences, obj_label (ConceptNet alike); the relation is the folder's name
                (LAMA names both corpora's file test.jsonl)

LAMA's convention decides the sentence: a relation with a template (`{"relation": "P19",
"template": "[X] was born in [Y] ."}`, [X] = the subject, [Y] = the mask) is scored with it;
relations without one by the record's `masked_sentences` (else its first evidence's
`masked_sentence`). Templates come from `relations.jsonl`, found beside the file or folder given
or in a parent folder up to the LAMA root (`probe.data.relations` names another file); Google-RE's
three templates are not in that file (LAMA's scripts/run_experiments.py holds them) and are built
in here, a relations file entry of the same name replacing one.

Scoring: one sentence per fact; the object must be one token of the model's vocabulary: objects
that are not are counted per relation (`oov`) and excluded, never scored as wrong. Per
relation: P@1, P@10 and MRR (rank of the gold token among the whole vocabulary); overall: the
mean over relations (LAMA's convention) and over facts.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from lightning_modules.adaptation.lm_head import LM_HEAD_WEIGHTS
from lightning_modules.data.jsonl_objects import jsonl_objects
from lightning_modules.objectives.mlm import MaskedLMObjective
from lightning_modules.objectives.parts import build_objective, module_path, objective_parts
from ptmlab.contracts import ConfigError, DataError, UntrustedCodeError
from ptmlab.methods.shipped import check_shipped_code

MASK = "[MASK]"
TEMPLATES_FILE = "relations.jsonl"


@dataclass
class Fact:
    relation: str
    subject: str
    obj: str
    sentence: str  # with [MASK]
    where: str  # file:line


@dataclass
class LamaData:
    facts: list[Fact] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def _read_jsonl(path: Path) -> list[tuple[int, dict]]:
    return list(jsonl_objects(path, path.read_text(encoding="utf-8").splitlines()))


# LAMA's Google-RE templates (scripts/run_experiments.py get_GoogleRE_parameters): not in
# relations.jsonl, which holds T-REx's.
GOOGLE_RE_TEMPLATES = {
    "place_of_birth": "[X] was born in [Y] .",
    "date_of_birth": "[X] (born [Y]).",
    "place_of_death": "[X] died in [Y] .",
}
# LAMA's data/ keeps relations.jsonl one level above the corpora (data/TREx/P19.jsonl): looking a
# few folders up finds it from a file or a corpus folder without wandering far above the data.
TEMPLATE_SEARCH_DEPTH = 3
UNNAMED_FILES = {"test", "dev", "train"}  # file names that are not relation names (Squad/test.jsonl)


def find_templates(root: Path) -> Path | None:
    """relations.jsonl beside `root` (a file's folder, or the folder itself) or in a parent."""
    folder = root if root.is_dir() else root.parent
    for candidate in [folder, *folder.parents][: TEMPLATE_SEARCH_DEPTH + 1]:
        if (candidate / TEMPLATES_FILE).is_file():
            return candidate / TEMPLATES_FILE
    return None


def read_templates(path: Path) -> dict[str, str]:
    templates = {}
    for lineno, record in _read_jsonl(path):
        if "relation" not in record or "template" not in record:
            raise DataError(f"{path}:{lineno}: a template needs 'relation' and 'template'")
        template = str(record["template"])
        if template.count("[Y]") != 1:
            raise DataError(f"{path}:{lineno}: template {template!r} needs exactly one [Y] (the object)")
        templates[str(record["relation"])] = template
    return templates


def relation_of(record: dict, file: Path) -> str:
    """T-REx's predicate_id, Google-RE's pred (its last part), else the file's name (its folder's
    for LAMA's test.jsonl, Google-RE's `<relation>_test.jsonl` without the suffix)."""
    if record.get("predicate_id"):
        return str(record["predicate_id"])
    if record.get("pred"):
        return str(record["pred"]).rstrip("/").rsplit("/", 1)[-1]
    if file.stem in UNNAMED_FILES:
        return file.parent.name
    return file.stem.removesuffix("_test")


def _record_sentence(record: dict, where: str) -> str | None:
    sentences = record.get("masked_sentences")
    if sentences:
        if not isinstance(sentences, list) or not all(isinstance(x, str) for x in sentences):
            raise DataError(f"{where}: 'masked_sentences' must be a list of strings")
        return sentences[0]
    evidences = record.get("evidences")
    if isinstance(evidences, list):
        for evidence in evidences:
            if isinstance(evidence, dict) and isinstance(evidence.get("masked_sentence"), str):
                return evidence["masked_sentence"]
    return None


def read_lama(path: str, relations: str | None = None) -> LamaData:
    """The facts of a LAMA file or folder (module docstring); `relations`: the templates file,
    else relations.jsonl found beside or above `path`."""
    root = Path(path)
    if root.is_dir():
        files = sorted(p for p in root.rglob("*.jsonl") if p.name != TEMPLATES_FILE)
    elif root.is_file():
        files = [root]
    else:
        raise DataError(f"probe.data.path={path}: no LAMA file or folder there")
    if relations:
        templates_path = Path(relations)
        if not templates_path.is_file():
            raise DataError(f"probe.data.relations={relations}: no templates file there")
    else:
        templates_path = find_templates(root)
    templates = {**GOOGLE_RE_TEMPLATES, **(read_templates(templates_path) if templates_path else {})}
    data = LamaData(files=[*files, *([templates_path] if templates_path else [])])
    for file in files:
        for lineno, record in _read_jsonl(file):
            where = f"{file}:{lineno}"
            if not isinstance(record.get("obj_label"), str) or not record["obj_label"].strip():
                raise DataError(f"{where}: missing 'obj_label'")
            relation = relation_of(record, file)
            subject = record.get("sub_label")
            subject = subject if isinstance(subject, str) and subject.strip() else None
            if relation in templates:
                if subject is None:
                    raise DataError(f"{where}: missing 'sub_label' (relation {relation!r} is scored by its template)")
                sentence = templates[relation].replace("[X]", subject).replace("[Y]", MASK)
            else:
                sentence = _record_sentence(record, where)
                if sentence is None:
                    searched = relations or f"{TEMPLATES_FILE} beside or above {root}"
                    raise DataError(
                        f"{where}: no 'masked_sentences' and no template for relation {relation!r} "
                        f"(looked in {searched}; probe.data.relations names the file)"
                    )
            if sentence.count(MASK) != 1:
                raise DataError(f"{where}: the sentence needs exactly one {MASK}: {sentence!r}")
            data.facts.append(Fact(relation, subject or "", record["obj_label"], sentence, where))
    if not data.facts:
        raise DataError(f"probe.data.path={path}: no facts")
    return data


class MaskedLM:
    """tokens → vocabulary logits: a backbone with its masked-LM head."""

    def __init__(self, tokenizer, logits_fn, label: str):
        self.tokenizer, self.logits_fn, self.label = tokenizer, logits_fn, label

    @torch.no_grad()
    def logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.logits_fn(input_ids, attention_mask)  # B × T × V


def _run_folder_of(ref: str) -> Path | None:
    path = Path(ref)
    for folder in (path, path.parent):
        if (folder / "config.yaml").is_file() and (folder / "checkpoints" / "last.ckpt").is_file():
            return folder
    return None


def _mlm_head_state(run_folder: Path, objective_name: str) -> dict:
    """The pre-training run's MLM head weights: its export's safetensors (export_lm_head writes the
    first masked-LM objective's head, the one chosen here), else the last checkpoint's, read without
    unpickling code (a checkpoint that needs more than tensors is refused)."""
    head_file = run_folder / "export" / LM_HEAD_WEIGHTS
    if head_file.is_file():
        from safetensors.torch import load_file

        return load_file(str(head_file))
    checkpoint = run_folder / "checkpoints" / "last.ckpt"
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise UntrustedCodeError(
            f"{checkpoint}: holds objects other than tensors, refusing to unpickle it "
            f"({str(exc).splitlines()[0][:200]})"
        ) from None
    prefix = f"objectives.{objective_name}.head."
    return {k[len(prefix) :]: v for k, v in state["state_dict"].items() if k.startswith(prefix)}


def load_masked_lm(resolved, cfg: DictConfig) -> MaskedLM:
    """The masked-LM head that belongs to the backbone: a ptmlab pretrain run's MLM objective head
    (from its config and last checkpoint), or a Hugging Face *ForMaskedLM checkpoint. ConfigError
    when there is none (before any extraction)."""
    from hydra.utils import get_class

    ref = str(OmegaConf.select(cfg, "backbone", default=None) or resolved.source)
    backbone, tokenizer = resolved.backbone, resolved.tokenizer
    backbone.eval()  # scored without dropout: a LAMA-only suite extracts nothing, which would set it
    if tokenizer.mask_token_id is None:
        raise ConfigError(f"probe=lama needs a tokenizer with a mask token: backbone={ref} has none")
    run_folder = _run_folder_of(ref) if ref not in ("random", "None") else None
    if run_folder is not None:
        run_cfg = OmegaConf.load(run_folder / "config.yaml")
        if OmegaConf.select(run_cfg, "objective") is not None and str(run_cfg.stage.name) == "pretrain":
            check_shipped_code(run_cfg.objective, str(run_folder / "config.yaml"), path="objective")
            for name, (_, module_cfg) in objective_parts(run_cfg.objective).items():
                if not issubclass(get_class(str(module_cfg._target_)), MaskedLMObjective):
                    continue
                path = module_path(run_cfg.objective, name)
                objective = build_objective(module_cfg, backbone, tokenizer, path)
                objective.head.load_state_dict(_mlm_head_state(run_folder, name))
                head = objective.head.eval()

                def logits(ids, mask, head=head):
                    hidden = backbone(ids, attention_mask=mask).last_hidden_state
                    return head(hidden, backbone.get_input_embeddings().weight)

                return MaskedLM(tokenizer, logits, f"{run_folder.name}:{name}")
    if getattr(backbone, "hf_native", False):
        architectures = list(getattr(backbone.config, "architectures", None) or [])
        if any(a.endswith("ForMaskedLM") for a in architectures):
            from transformers import AutoModelForMaskedLM

            model = AutoModelForMaskedLM.from_pretrained(backbone.name_or_path).eval()
            return MaskedLM(
                tokenizer, lambda ids, mask: model(input_ids=ids, attention_mask=mask).logits, backbone.name_or_path
            )
    raise ConfigError(
        f"probe=lama needs a model with a masked-LM head: backbone={ref} has none (a ptmlab "
        f"pretrain run with an MLM objective, or a Hugging Face *ForMaskedLM checkpoint)"
    )


def object_id(tokenizer, obj: str) -> int | None:
    """The object's token id, or None when it is not exactly one known token."""
    pieces = tokenizer.tokenize(obj)
    if len(pieces) != 1:
        return None
    token_id = tokenizer.convert_tokens_to_ids(pieces[0])
    return None if token_id is None or token_id == tokenizer.unk_token_id else int(token_id)


@torch.no_grad()
def run_cloze(mlm: MaskedLM, data: LamaData, batch_size: int = 32) -> dict:
    tokenizer = mlm.tokenizer
    per_relation: dict[str, dict] = {}
    scored: list[tuple[Fact, int]] = []
    for fact in data.facts:
        entry = per_relation.setdefault(
            fact.relation, {"relation": fact.relation, "facts": 0, "oov": 0, "scored": 0, "ranks": []}
        )
        entry["facts"] += 1
        gold = object_id(tokenizer, fact.obj)
        if gold is None:
            entry["oov"] += 1
        else:
            scored.append((fact, gold))
    for start in range(0, len(scored), batch_size):
        chunk = scored[start : start + batch_size]
        texts = [f.sentence.replace(MASK, tokenizer.mask_token) for f, _ in chunk]
        enc = tokenizer(texts, padding=True, return_tensors="pt")
        logits = mlm.logits(enc["input_ids"], enc["attention_mask"])
        for b, (fact, gold) in enumerate(chunk):
            position = (enc["input_ids"][b] == tokenizer.mask_token_id).nonzero()
            if len(position) != 1:
                raise DataError(f"{fact.where}: the tokenizer made {len(position)} mask tokens of the sentence")
            row = logits[b, int(position[0])]
            rank = int((row > row[gold]).sum()) + 1
            per_relation[fact.relation]["ranks"].append(rank)
            per_relation[fact.relation]["scored"] += 1
    relations = []
    for rel in sorted(per_relation):
        entry = per_relation[rel]
        ranks = entry.pop("ranks")
        if ranks:
            entry.update(
                p_at_1=round(sum(r == 1 for r in ranks) / len(ranks), 5),
                p_at_10=round(sum(r <= 10 for r in ranks) / len(ranks), 5),
                mrr=round(sum(1 / r for r in ranks) / len(ranks), 5),
            )
        relations.append(entry)
    with_scores = [r for r in relations if r["scored"]]
    all_ranks_n = sum(r["scored"] for r in with_scores)

    def macro(key: str) -> float | None:
        return round(sum(r[key] for r in with_scores) / len(with_scores), 5) if with_scores else None

    def micro(key: str) -> float | None:
        return round(sum(r[key] * r["scored"] for r in with_scores) / all_ranks_n, 5) if all_ranks_n else None

    return {
        "probe_task": "lama",
        "family": "cloze",
        "metric": "p_at_1",
        "model_head": mlm.label,
        "relations": relations,
        "facts": len(data.facts),
        "scored": all_ranks_n,
        "oov": sum(r["oov"] for r in relations),
        "p_at_1": macro("p_at_1"),
        "p_at_10": macro("p_at_10"),
        "mrr": macro("mrr"),
        "micro": {"p_at_1": micro("p_at_1"), "p_at_10": micro("p_at_10"), "mrr": micro("mrr")},
        "best_score": macro("p_at_1"),
        "layers": [],
    }
