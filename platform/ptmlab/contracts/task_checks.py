"""Compose-time checks of the `task` node (torch-free: the API validates submissions with it).

Listed in `ptmlab.config.CHECKS`; part of `ptmlab.contracts` because the science half runs the
same checks on the tasks it builds (lightning_modules/tasks/spec.py, stages/multitask.py). Each message names the offending keys, e.g. a
regression task with a classification head: `task.kind=regression needs a 1-unit regression
head but adaptation.head.num_labels=3`.
"""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from ptmlab.contracts.errors import ConfigError

TASK_KINDS = (
    "classification",
    "regression",
    "token_classification",
    "generation",
    "span_extraction",
    "multiple_choice",
)
# Metric names (Hugging Face `evaluate` glue names) -> the task kind they apply to.
METRIC_KINDS = {
    "accuracy": "classification",
    "f1": "classification",
    "macro_f1": "classification",
    "matthews_correlation": "classification",
    # MultiRC's F1 over answer options (lightning_modules/tasks/answer_option_metrics.py); exact_match below
    "f1a": "classification",
    "pearson": "regression",
    "spearmanr": "regression",
    "mse": "regression",
    "mae": "regression",
    # seqeval's entity scores: default (conlleval) mode, and strict mode with the IOB2 scheme
    # (lightning_modules/tasks/token_metrics.py); token_accuracy for tagging (UPOS).
    **{f"entity_{m}{mode}": "token_classification" for m in ("f1", "precision", "recall") for mode in ("", "_strict")},
    "token_accuracy": "token_classification",
    # the official SQuAD scripts' EM and token F1 (lightning_modules/tasks/span_metrics.py); f1 below
    "exact_match": "span_extraction",
    # sacreBLEU and rouge-score (lightning_modules/tasks/generation_metrics.py)
    **dict.fromkeys(("bleu", "chrf", "length_ratio", "rouge1", "rouge2", "rougeL", "rougeLsum"), "generation"),
}
# The reader of source/target pairs: the generation kind reads only it.
GENERATION_READERS = ("lightning_modules.data.seq2seq_files.Seq2SeqReader",)
# Readers that return one tag per word (lightning_modules/data/): the token kind reads only these.
TOKEN_READERS = (
    "lightning_modules.data.conll_columns.ConllReader",
    "lightning_modules.data.conllu_tags.ConlluTagReader",
)
# The SQuAD JSON reader: the span kind reads only it (questions, contexts, answers as character spans).
SPAN_READERS = ("lightning_modules.data.squad_json.SquadReader",)
# The multiple-choice JSONL reader: the multiple-choice kind reads only it (a context, N choices, an index).
CHOICE_READERS = ("lightning_modules.data.choice_jsonl.MultipleChoiceReader",)
# A metric name more than one kind reports: f1 is a class F1 and SQuAD's token F1; exact_match is
# SQuAD's and MultiRC's (all of a question's answer options right); accuracy is also the right
# choice's rate of a multiple-choice task.
SHARED_METRICS = {
    "f1": ("classification", "span_extraction"),
    "exact_match": ("span_extraction", "classification"),
    "accuracy": ("multiple_choice",),
}
REQUIRED_KEYS = ("name", "kind", "metrics", "main_metric", "data")
TASK_NAME = re.compile(r"[A-Za-z0-9_\-]+(/[A-Za-z0-9_\-]+)*")  # conf/task/<name>.yaml, e.g. glue/sst2


def check_task_node(task: DictConfig, key: str = "task") -> None:
    for k in REQUIRED_KEYS:
        if k not in task or OmegaConf.is_missing(task, k) or task.get(k) is None:
            raise ConfigError(f"{key}.{k} is required (task {task.get('name', '?')})")
    kind = str(task.kind)
    if kind not in TASK_KINDS:
        raise ConfigError(f"{key}.kind={kind} is unknown; valid: {', '.join(TASK_KINDS)}")
    reader = OmegaConf.select(task, "data._target_", default=None)
    if reader is not None and (kind == "generation") != (str(reader) in GENERATION_READERS):
        wants = (
            "the source/target reader " + GENERATION_READERS[0]
            if kind == "generation"
            else "a labelled reader, not the source/target one"
        )
        raise ConfigError(f"{key}.kind={kind} needs {wants}; {key}.data._target_={reader}")
    if kind == "generation":
        _check_generation(task, key)
    elif reader is not None and (kind == "token_classification") != (str(reader) in TOKEN_READERS):
        wants = (
            "a word-tagging reader (" + ", ".join(TOKEN_READERS) + ")"
            if kind == "token_classification"
            else "a sentence reader, not a word-tagging one"
        )
        raise ConfigError(f"{key}.kind={kind} needs {wants}; {key}.data._target_={reader}")
    if reader is not None and (kind == "span_extraction") != (str(reader) in SPAN_READERS):
        wants = (
            "the SQuAD reader " + SPAN_READERS[0] if kind == "span_extraction" else "a reader other than the SQuAD one"
        )
        raise ConfigError(f"{key}.kind={kind} needs {wants}; {key}.data._target_={reader}")
    if kind == "span_extraction":
        _check_spans(task, key)
    if reader is not None and (kind == "multiple_choice") != (str(reader) in CHOICE_READERS):
        wants = (
            "the multiple-choice reader " + CHOICE_READERS[0]
            if kind == "multiple_choice"
            else "a reader other than the multiple-choice one"
        )
        raise ConfigError(f"{key}.kind={kind} needs {wants}; {key}.data._target_={reader}")
    scoring = task.get("choice_scoring")
    if scoring is not None and str(scoring) not in ("auto", "head", "log_likelihood"):
        raise ConfigError(f"{key}.choice_scoring={scoring} is unknown; valid: auto, head, log_likelihood")
    metrics = [str(m) for m in task.metrics] if isinstance(task.metrics, ListConfig) else [str(task.metrics)]
    if not metrics:
        raise ConfigError(f"{key}.metrics is empty")
    for m in metrics:
        if m not in METRIC_KINDS:
            raise ConfigError(f"{key}.metrics: unknown metric '{m}'; valid: {', '.join(METRIC_KINDS)}")
        if METRIC_KINDS[m] != kind and kind not in SHARED_METRICS.get(m, ()):
            raise ConfigError(f"{key}.metrics={m} is a {METRIC_KINDS[m]} metric but {key}.kind={kind}")
    if str(task.main_metric) not in metrics:
        raise ConfigError(f"{key}.main_metric={task.main_metric} is not one of {key}.metrics ({', '.join(metrics)})")
    suffixes = [""] + [str(s) for s in (task.get("eval_metric_suffix") or {}).values()]
    for g in task.get("glue_metrics") or []:
        if not any(str(g) == m + s for m in metrics for s in suffixes):
            raise ConfigError(f"{key}.glue_metrics={g} is not produced by {key}.metrics/{key}.eval_metric_suffix")
    labels = task.get("labels")
    num_labels = task.get("num_labels")
    if kind == "regression":
        if labels is not None:
            raise ConfigError(f"{key}.kind=regression takes no {key}.labels (got {list(labels)})")
        if num_labels is not None and int(num_labels) != 1:
            raise ConfigError(f"{key}.kind=regression needs {key}.num_labels=1 (a 1-unit head), got {num_labels}")
    else:
        if labels is not None and len(set(map(str, labels))) != len(labels):
            raise ConfigError(f"{key}.labels has duplicates: {list(labels)}")
        if num_labels is not None and int(num_labels) < 2:
            raise ConfigError(f"{key}.kind=classification needs {key}.num_labels >= 2, got {num_labels}")
        if labels is not None and num_labels is not None and int(num_labels) != len(labels):
            raise ConfigError(f"{key}.num_labels={num_labels} but {key}.labels has {len(labels)} values")
    for k in ("max_train_samples", "max_eval_samples"):
        v = task.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise ConfigError(f"{key}.{k}={v} must be null or a positive integer")
    max_length = task.get("max_length")
    if max_length is not None and (not isinstance(max_length, int) or max_length < 4):
        raise ConfigError(f"{key}.max_length={max_length} must be an integer >= 4")


def check_task(cfg: DictConfig) -> None:
    """ptmlab.config.CHECKS entry: a fine-tune names its task; the task node itself, then heads
    elsewhere that must agree with it. At compose time, so the API and the dashboard's submit form
    refuse such a job before it is queued, as `ptmlab run` does before it starts."""
    task = cfg.get("task") if "task" in cfg else None
    if task is None and OmegaConf.select(cfg, "stage.name") == "finetune":
        raise ConfigError("stage=finetune needs a task (task=glue/sst2, task=senteval/mr, task=tabular ...)")
    if not isinstance(task, DictConfig):
        return
    check_task_node(task)
    kind = str(task.kind)
    if kind == "generation":
        _check_generation_adaptation(cfg)
    expected = 1 if kind == "regression" else task.get("num_labels")
    if kind == "classification" and expected is None and task.get("labels") is not None:
        expected = len(task.labels)
    # Any top-level node may carry a `head` (adaptation, model, ...): it must fit the task.
    for node_key in cfg:
        node = cfg.get(node_key)
        if node_key == "task" or not isinstance(node, DictConfig) or "head" not in node:
            continue
        head = node.get("head")
        if not isinstance(head, DictConfig):
            continue
        head_kind = OmegaConf.select(head, "kind", default=None)
        if head_kind is not None and str(head_kind) != kind:
            raise ConfigError(f"task.kind={kind} (task={task.name}) does not fit {node_key}.head.kind={head_kind}")
        head_n = _literal(head, "num_labels")
        if head_n is not None and expected is not None and int(head_n) != int(expected):
            what = "a 1-unit regression head" if kind == "regression" else f"{expected} classes"
            raise ConfigError(
                f"task={task.name} needs {what} (task.num_labels) but {node_key}.head.num_labels={head_n}"
            )


# -- multi-task runs: `stage.tasks` names task configs ---------------------------------------------


def conf_dir(cfg: DictConfig) -> Path:
    """The config folder a composed config came from (`paths.conf_dir`, set by ptmlab.config)."""
    folder = OmegaConf.select(cfg, "paths.conf_dir", default=None)
    if not folder:
        raise ConfigError(
            "paths.conf_dir is not set: compose the config with ptmlab.config.compose_config "
            "or run it through `python -m ptmlab.run`"
        )
    return Path(str(folder))


def available_tasks(conf: Path) -> list[str]:
    folder = conf / "task"
    return sorted(str(p.relative_to(folder).with_suffix("")) for p in folder.rglob("*.yaml"))


def task_config(name: str, cfg: DictConfig) -> DictConfig:
    """conf/task/<name>.yaml under a root that holds `paths` (for `${paths.data_dir}`), with the
    stage's subset sizes and per-task overrides applied; returns the root's `task` node. Read
    directly: a running Hydra app cannot compose another member of the `task` group."""
    conf = conf_dir(cfg)
    # A name from a remote submission: config names only, never a path out of conf/task.
    if not TASK_NAME.fullmatch(name):
        raise ConfigError(f"stage.tasks: '{name}' is not a task config name (like glue/sst2)")
    path = conf / "task" / f"{name}.yaml"
    if not path.is_file():
        raise ConfigError(
            f"stage.tasks: unknown task '{name}' (no conf/task/{name}.yaml); "
            f"available: {', '.join(available_tasks(conf))}"
        )
    root = OmegaConf.create({"paths": OmegaConf.to_container(cfg.paths, resolve=True), "task": OmegaConf.load(path)})
    for key in ("max_train_samples", "max_eval_samples"):
        if cfg.stage.get(key) is not None:
            root.task[key] = int(cfg.stage[key])
    patch = (cfg.stage.get("task_overrides") or {}).get(str(root.task.name))
    if patch is not None:
        root.task = OmegaConf.merge(root.task, patch)
    return root.task


def multitask_task_nodes(cfg: DictConfig) -> dict[str, DictConfig]:
    """`stage.tasks` -> {task name (sst2, rte ...): its task node}, in order; a missing or empty
    list, an unknown task, two tasks of one name or an override for a task not in the run is a
    ConfigError naming it."""
    names = list(cfg.stage.get("tasks") or [])
    if not names:
        raise ConfigError("stage.tasks is empty: list task configs, e.g. 'stage.tasks=[glue/sst2,glue/rte]'")
    nodes: dict[str, DictConfig] = {}
    for name in names:
        node = task_config(str(name), cfg)
        if str(node.name) in nodes:
            raise ConfigError(f"stage.tasks: two tasks are named '{node.name}' ({name})")
        if str(node.get("kind")) == "generation":
            raise ConfigError(
                f"stage.tasks: {name} is a generation task; stage=multitask takes classification "
                f"tasks only (fine-tune it with stage=finetune)"
            )
        if str(node.get("kind")) in (
            "token_classification",
            "span_extraction",
            "multiple_choice",
        ):  # the multi-task model pools one vector per sequence
            raise ConfigError(
                f"stage.tasks: {name} is a {node.kind} task; stage=multitask takes "
                f"sentence-level tasks only (fine-tune it with stage=finetune)"
            )
        nodes[str(node.name)] = node
    unknown = set(cfg.stage.get("task_overrides") or {}) - set(nodes)
    if unknown:
        raise ConfigError(
            f"stage.task_overrides.{sorted(unknown)[0]}: not a task of this run (tasks: {', '.join(nodes)})"
        )
    return nodes


def check_multitask(cfg: DictConfig) -> None:
    """ptmlab.config.CHECKS entry: a stage with `tasks` (stage=multitask) checks each task as `task=` is."""
    stage = cfg.get("stage") if "stage" in cfg else None
    if not isinstance(stage, DictConfig) or "tasks" not in stage:
        return
    for name, node in multitask_task_nodes(cfg).items():
        check_task_node(node, key=f"stage.tasks[{name}]")


def _check_generation(task: DictConfig, key: str) -> None:
    """A generation task's limits, label smoothing and decoding settings (ptmlab.contracts.decoding)."""
    from ptmlab.contracts.decoding import DecodingSettings

    n = task.get("max_target_length", 128)
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        raise ConfigError(f"{key}.max_target_length={n} must be an integer >= 2 (a target token and the end token)")
    smoothing = task.get("label_smoothing") or 0.0
    if not isinstance(smoothing, (int, float)) or not 0.0 <= float(smoothing) < 1.0:
        raise ConfigError(f"{key}.label_smoothing={smoothing} must be in [0, 1)")
    node = task.get("generation")
    DecodingSettings.from_dict(OmegaConf.to_container(node, resolve=True) if node is not None else None)


# Virtual tokens under task.kind=generation, by the composed model's family (lightning_modules/adaptation/
# virtual_tokens.py `refuse_on_generator` says the same at build time, for backbones a reference loads)
VIRTUAL_TOKEN_GENERATORS = {"prefix_tuning": ("decoder", "encoder_decoder", "hf"), "prompt_tuning": ("decoder",)}


def _check_generation_adaptation(cfg: DictConfig) -> None:
    mode = OmegaConf.select(cfg, "adaptation.name", default=None)
    family = OmegaConf.select(cfg, "model.family", default=None)
    if mode not in VIRTUAL_TOKEN_GENERATORS or family is None or OmegaConf.select(cfg, "backbone", default=None):
        return  # a backbone reference replaces the model group: checked when it loads
    if str(family) not in VIRTUAL_TOKEN_GENERATORS[mode]:
        raise ConfigError(
            f"adaptation={mode} does not apply to a model.family={family} generator under "
            f"task.kind=generation; it takes {' or '.join(VIRTUAL_TOKEN_GENERATORS[mode])} models "
            f"(use adaptation=lora, bitfit or full)"
        )


def _check_spans(task: DictConfig, key: str) -> None:
    """Windows that overlap less than they are long, positive answer lengths and candidate counts."""
    for k in ("max_answer_length", "n_best_size"):
        v = task.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise ConfigError(f"{key}.{k}={v} must be a positive integer")
    stride, length = task.get("doc_stride"), task.get("max_length")
    if stride is not None and (
        not isinstance(stride, int) or stride < 0 or (isinstance(length, int) and stride >= length)
    ):
        raise ConfigError(
            f"{key}.doc_stride={stride} must be an integer >= 0 and below {key}.max_length={length} "
            "(the overlap of consecutive windows)"
        )


def _literal(node: DictConfig, key: str):
    """The value unless it is missing or an interpolation of the task's own value."""
    if key not in node or OmegaConf.is_missing(node, key):
        return None
    raw = node._get_node(key)._value()
    if isinstance(raw, str) and raw.startswith("${"):
        return None
    return node.get(key)
