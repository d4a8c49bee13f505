"""SuperGLUE and FewGLUE (issue 23, item 4) with tiny random models: the reader on the shipped files
(counts, the WiC/WSC marks, MultiRC's questions), the few-shot draw and the seeded split of the dev
file (and the summary field that says so), bad rows (one line naming file and line, before anything trains), the
metrics against hand-computed cases (MultiRC F1a and exact match, CB macro-F1), one fine-tune per
input shape through the stage (a pair task; MultiRC, whose exact match is recomputed by hand from
the prediction file) with the task model's round trip, and the PET templates of all six tasks on a
tiny MLM. No full SuperGLUE training sets are here: these tests prove metrics, heads and the round
trip, not accuracy."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from lightning_modules.data.superglue import SuperGlueReader, read_records, records_to_split
from lightning_modules.tasks.answer_option_metrics import answer_option_metrics
from lightning_modules.tasks.metrics import compute_metrics
from ptmlab.contracts import ConfigError, DataError
from ptmlab.contracts.superglue import SUPERGLUE_TASKS

CONF_TASKS = Path(__file__).resolve().parents[2] / "conf" / "task" / "superglue"
# task -> (folder, records in train / dev32 / val, examples in each); MultiRC: one example per answer option
SHIPPED = {
    "boolq": ("BoolQ", (32, 32, 3270), (32, 32, 3270)),
    "cb": ("CB", (32, 32, 56), (32, 32, 56)),
    "rte": ("RTE", (32, 32, 277), (32, 32, 277)),
    "wic": ("WiC", (32, 32, 638), (32, 32, 638)),
    "wsc": ("WSC", (32, 32, 104), (32, 32, 104)),
    "multirc": ("MultiRC", (32, 32, 83), (154, 167, 4848)),
}
FILES = ("train", "dev32", "val")


def shipped(data_dir: Path, task: str, file: str) -> Path:
    return data_dir / "superglue" / SHIPPED[task][0] / f"{file}.jsonl"


# -- reader --------------------------------------------------------------------------------------


@pytest.mark.parametrize("task", list(SHIPPED))
def test_reader_reads_the_shipped_files(data_dir, task):
    from lightning_modules.tasks.spec import load_task
    from ptmlab.config import compose_config

    _, records, examples = SHIPPED[task]
    for file, n_records, n_examples in zip(FILES, records, examples, strict=True):
        path = shipped(data_dir, task, file)
        split = records_to_split(task, file, path, read_records(path, file))
        assert (len(read_records(path, file)), len(split)) == (n_records, n_examples), file
        assert all(len(ex.texts) == 2 and all(ex.texts) for ex in split.examples)
    # The config's label set takes every label of the full validation set (load_task maps or refuses them).
    loaded = load_task(compose_config([f"task=superglue/{task}"]).task)
    assert (len(loaded.train), len(loaded.data.splits["dev"])) == (examples[0], examples[2])
    counts = torch.bincount(torch.tensor([ex.label for ex in loaded.data.splits["dev"].examples]))
    assert len(counts) == len(loaded.spec.labels) and bool((counts > 0).all())
    assert loaded.data.origin == {
        "train": str(shipped(data_dir, task, "train")),
        "dev": str(shipped(data_dir, task, "val")),
    }


def test_marks_and_question_groups(data_dir):
    wic = records_to_split("wic", "train", "x", read_records(shipped(data_dir, "wic", "train"), "train"))
    assert wic.examples[0].texts == ("You make me *feel* naked.", "She *felt* small and insignificant.")
    wsc = records_to_split("wsc", "train", "x", read_records(shipped(data_dir, "wsc", "train"), "train"))
    assert wsc.examples[0].texts == (
        "The actress used to be named Terpsichore , but she changed it to [Tina] a few "
        "years ago, because she figured *it* was easier to pronounce.",
        "Does it refer to Tina ?",
    )  # span2_index 21: the second "it"
    assert wsc.examples[1].texts == (
        "The city councilmen refused [the demonstrators] a permit because *they* advocated violence.",
        "Does they refer to The demonstrators ?",
    )
    multirc = records_to_split("multirc", "val", "x", read_records(shipped(data_dir, "multirc", "val"), "val"))
    groups = {ex.group for ex in multirc.examples}
    assert len(groups) == 953  # the official question count
    first = [ex for ex in multirc.examples if ex.group == multirc.examples[0].group]
    assert len({ex.row for ex in first}) == 1 and len({ex.id for ex in multirc.examples}) == 4848
    assert (
        first[0]
        .texts[1]
        .startswith("Would the mass of a baseball affect how much force you have to use to pick it up? ")
    )  # the question, then the answer


def test_few_shot_draw_and_the_seeded_split_of_dev(data_dir):
    train, val = str(shipped(data_dir, "rte", "train")), str(shipped(data_dir, "rte", "val"))
    whole = SuperGlueReader("rte", train, val, few_shot=32).read()
    assert len(whole.train) == 32 and "32 records (task.few_shot, the whole file)" in whole.origin["train"]
    drawn = SuperGlueReader("rte", train, val, few_shot=8, seed=1).read()
    rows = [ex.row for ex in drawn.train.examples]
    assert len(rows) == 8 and rows == sorted(rows) and "drawn with seed 1" in drawn.origin["train"]
    assert rows == [ex.row for ex in SuperGlueReader("rte", train, val, few_shot=8, seed=1).read().train.examples]
    assert rows != [ex.row for ex in SuperGlueReader("rte", train, val, few_shot=8, seed=2).read().train.examples]
    with pytest.raises(DataError, match=r"train.jsonl: task.few_shot=33 but the file holds 32 records"):
        SuperGlueReader("rte", train, val, few_shot=33).read()
    split = SuperGlueReader("rte", None, val, train_from_dev=200, seed=3).read()
    train_ids, dev_ids = {ex.id for ex in split.train.examples}, {ex.id for ex in split.splits["dev"].examples}
    assert (len(train_ids), len(dev_ids)) == (200, 77) and not train_ids & dev_ids
    assert split.origin["train"].startswith(f"seeded split of {val}: 200 of 277 records")
    # MultiRC is split by paragraph: no passage, and so no question, on both sides
    mrc = SuperGlueReader("multirc", None, str(shipped(data_dir, "multirc", "val")), train_from_dev=60).read()
    assert not {ex.row for ex in mrc.train.examples} & {ex.row for ex in mrc.splits["dev"].examples}
    with pytest.raises(ConfigError, match="task.few_shot=8 and task.data.train_from_dev=4: pick one"):
        SuperGlueReader("rte", train, val, few_shot=8, train_from_dev=4)


def _write(path: Path, records: list) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return str(path)


OK_BOOLQ = {"question": "is it", "passage": "it is", "label": True, "idx": 0}


@pytest.mark.parametrize(
    "task, bad, message",
    [
        ("boolq", {"question": "q", "label": False}, r"bad.jsonl: line 2: field 'passage' is missing"),
        ("boolq", "{not json", r"bad.jsonl: line 2 is not JSON"),
        (
            "wic",
            {
                "word": "w",
                "sentence1": "a word",
                "sentence2": "b",
                "start1": 2,
                "end1": 6,
                "start2": 0,
                "end2": 9,
                "label": True,
            },
            r"bad.jsonl: line 2: target offsets start2/end2: 0:9 are outside the sentence \(1 characters\)",
        ),
        (
            "wsc",
            {
                "text": "he saw it",
                "target": {"span1_index": 0, "span1_text": "he", "span2_index": 7, "span2_text": "it"},
                "label": True,
            },
            r"bad.jsonl: line 2: target.span2_index=7 is outside the text \(3 words\)",
        ),
        (
            "multirc",
            {"passage": {"text": "p", "questions": [{"question": "q", "answers": [{"text": "a"}]}]}},
            r"bad.jsonl: line 2: field 'label' is missing",
        ),
        (
            "cb",
            {"premise": "p", "hypothesis": 3, "label": "neutral"},
            r"bad.jsonl: line 2: field 'hypothesis' is int 3, not str",
        ),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path, task, bad, message):
    path = _write(tmp_path / "bad.jsonl", ["", bad])  # a blank line is skipped but counted
    with pytest.raises(DataError, match=message) as caught:
        records_to_split(task, "dev", path, read_records(path, "task.data.dev"))
    assert "\n" not in str(caught.value)


def test_a_label_outside_the_label_set_names_file_and_line(tmp_path, data_dir):
    from lightning_modules.tasks.spec import load_task
    from ptmlab.config import compose_config

    bad = _write(
        tmp_path / "cb.jsonl",
        [
            {"premise": "p", "hypothesis": "h", "label": "neutral"},
            {"premise": "p", "hypothesis": "h", "label": "maybe"},
        ],
    )
    with pytest.raises(DataError, match=r"cb.jsonl: line 2: label 'maybe' is not in the label set of task cb"):
        load_task(compose_config(["task=superglue/cb", f"task.data.dev={bad}"]).task)
    bool_as_text = _write(tmp_path / "boolq.jsonl", [OK_BOOLQ, {**OK_BOOLQ, "label": "yes"}])
    with pytest.raises(DataError, match=r"boolq.jsonl: line 2: label 'yes' is not in the label set of task boolq"):
        load_task(compose_config(["task=superglue/boolq", f"task.data.dev={bool_as_text}"]).task)


# -- metrics, hand-computed ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "preds, labels, groups, f1a, em",
    [
        # q1 all right; q2 one false positive; q3 (one option) missed: TP 2, FP 1, FN 1
        ([1, 0, 1, 0, 1, 0], [1, 0, 1, 0, 0, 1], ["q1", "q1", "q1", "q2", "q2", "q3"], 2 / 3, 1 / 3),
        # groups need not be contiguous: a wrong on its third option; b right. TP 2, FP 1, FN 0
        ([1, 0, 1, 1], [1, 0, 0, 1], ["a", "b", "a", "b"], 0.8, 0.5),
        # no true option and none predicted: F1a 0 (scikit-learn's zero_division default), every question exact
        ([0, 0, 0], [0, 0, 0], ["a", "a", "b"], 0.0, 1.0),
        # everything predicted true: P 2/5, R 1; no question exact
        ([1, 1, 1, 1, 1], [1, 0, 0, 1, 0], ["a", "a", "b", "b", "c"], 4 / 7, 0.0),
    ],
)
def test_multirc_f1a_and_exact_match(preds, labels, groups, f1a, em):
    from sklearn.metrics import f1_score

    got = answer_option_metrics(["f1a", "exact_match"], torch.tensor(preds), torch.tensor(labels), groups)
    assert got == pytest.approx({"f1a": f1a, "exact_match": em})
    assert got["f1a"] == pytest.approx(f1_score(labels, preds, zero_division=0))  # the reference implementation
    logits = torch.nn.functional.one_hot(torch.tensor(preds), 2).float()  # B×2 logits give the same
    assert answer_option_metrics(["f1a", "exact_match"], logits, torch.tensor(labels), groups) == got


def test_cb_accuracy_and_macro_f1():
    # per class (P, R, F1): 0 (1, 2/3, 0.8), 1 (1/2, 1/2, 1/2), 2 (1/2, 1, 2/3)
    got = compute_metrics(["accuracy", "macro_f1"], [0, 0, 1, 1, 2, 2], [0, 0, 0, 1, 1, 2], num_labels=3)
    assert got == pytest.approx({"accuracy": 4 / 6, "macro_f1": (0.8 + 0.5 + 2 / 3) / 3})
    # a class neither in the labels nor predicted (a small CB dev split) is left out, as scikit-learn does
    assert compute_metrics(["macro_f1"], [0, 1, 1, 1], [0, 0, 1, 1], num_labels=3)["macro_f1"] == pytest.approx(
        (2 / 3 + 0.8) / 2
    )


def test_the_configs_agree_with_the_superglue_table():
    from omegaconf import OmegaConf

    for path in CONF_TASKS.glob("*.yaml"):
        node = OmegaConf.load(path)
        display, metrics = SUPERGLUE_TASKS[str(node.name)]
        assert (node.display_name, list(node.superglue_metrics)) == (display, list(metrics)), path.name
        assert set(metrics) <= set(node.metrics) and node.glue_metrics == []


# -- through the stage: a pair task and MultiRC, tiny bert --------------------------------------


@pytest.fixture(scope="module")
def corpus(data_dir, tmp_path_factory) -> Path:
    """FewGLUE training text and the verbalizer words: a WordPiece vocabulary with each word whole."""
    folder = tmp_path_factory.mktemp("corpus")
    lines = []
    for task in SHIPPED:
        for ex in records_to_split(
            task, "train", "x", read_records(shipped(data_dir, task, "train"), "train")
        ).examples:
            lines += list(ex.texts)
    (folder / "doc.txt").write_text("\n".join(lines + ["yes no maybe"] * 50) + "\n")
    return folder


def tiny(corpus: Path, *extra: str) -> list[str]:
    return [
        "stage=finetune",
        "model=bert_tiny",
        "data=text_files",
        f"data.corpus.path={corpus}",
        "tokenizer.vocab_size=800",
        "tokenizer.min_frequency=1",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
        "stage.batch_size=16",
        "stage.eval_batch_size=64",
        "stage.max_steps=3",
        "stage.lr=1e-3",
        "seed=7",
        "task.max_length=64",
        *extra,
    ]


@pytest.fixture(scope="module")
def runs(module_ptmlab_home, corpus, data_dir, tmp_path_factory) -> dict:
    from lightning_modules.stages.finetune import run_finetune
    from ptmlab.config import compose_config

    cases = {
        # the pair shape, trained on a seeded split of RTE's validation set
        "rte": ["task=superglue/rte", "task.data.train_from_dev=64", "task.max_eval_samples=64"],
        # MultiRC: one example per answer option, scored per question, on FewGLUE's dev32
        "multirc": ["task=superglue/multirc", f"task.data.dev={shipped(data_dir, 'multirc', 'dev32')}"],
    }
    folder, out = tmp_path_factory.mktemp("runs"), {}
    for name, extra in cases.items():
        run_dir = folder / name
        run_finetune(compose_config([*tiny(corpus, *extra), f"+run_dir={run_dir}"]))
        out[name] = (
            run_dir,
            json.loads((run_dir / "summary.json").read_text()),
            compose_config([*tiny(corpus, *extra), f"+run_dir={folder / 'scratch'}"]),
        )
    return out


def _reloaded_metrics(run_dir: Path, cfg) -> dict:
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.evaluation import evaluate
    from lightning_modules.tasks.spec import load_task

    return evaluate(load_task_model(str(run_dir)), load_task(cfg.task), "dev")


def test_pair_task_through_the_stage_with_its_data_origin(runs):
    from ptmlab.contracts.summaries import FinetuneSummary

    run_dir, summary, cfg = runs["rte"]
    checked = FinetuneSummary.model_validate(summary)
    assert checked.task == "superglue_rte" and set(checked.metrics) == {"accuracy"}
    assert summary["data_origin"]["train"].endswith("val.jsonl: 64 of 277 records (task.data.train_from_dev, seed 42)")
    assert summary["data_origin"]["train"].startswith("seeded split of ")
    rows = list(csv.DictReader((run_dir / "predictions" / "dev.tsv").open(), delimiter="\t"))
    assert len(rows) == 64 and {r["prediction"] for r in rows} <= {"entailment", "not_entailment"}
    right = sum(r["prediction"] == r["label"] for r in rows) / len(rows)
    assert checked.metrics["accuracy"] == pytest.approx(right)
    assert _reloaded_metrics(run_dir, cfg) == pytest.approx(checked.metrics, abs=1e-6)  # the task model's round trip


def test_multirc_through_the_stage_scores_questions_from_its_predictions(runs):
    from sklearn.metrics import f1_score

    run_dir, summary, cfg = runs["multirc"]
    assert summary["main_metric"] == "f1a" and set(summary["metrics"]) == {"f1a", "exact_match"}
    rows = list(csv.DictReader((run_dir / "predictions" / "dev.tsv").open(), delimiter="\t"))
    assert len(rows) == 167  # every answer option of dev32, id <paragraph>-<question>-<answer>
    by_question: dict[str, bool] = {}
    for r in rows:
        question = r["index"].rsplit("-", 1)[0]
        by_question[question] = by_question.get(question, True) and r["prediction"] == r["label"]
    assert len(by_question) == 32
    assert summary["metrics"]["exact_match"] == pytest.approx(sum(by_question.values()) / 32)
    f1a = f1_score([r["label"] for r in rows], [r["prediction"] for r in rows], pos_label="1", zero_division=0)
    assert summary["metrics"]["f1a"] == pytest.approx(f1a)
    assert _reloaded_metrics(run_dir, cfg) == pytest.approx(summary["metrics"], abs=1e-6)


def test_a_bad_label_is_one_line_in_the_preflight(module_ptmlab_home, corpus, tmp_path, monkeypatch):
    """In process, through what ptmlab.run calls before the training stack (`stage.preflight`); exit 2
    through the entry point is the finetune stage's one run (stage_preflight.py)."""
    from stage_preflight import error_line_before_work

    bad = _write(
        tmp_path / "cb.jsonl",
        [
            {"premise": "p", "hypothesis": "h", "label": "neutral"},
            {"premise": "p", "hypothesis": "h", "label": "unsure"},
        ],
    )
    line = error_line_before_work(tiny(corpus, "task=superglue/cb", f"task.data.dev={bad}"), monkeypatch)
    assert line == (
        f"error[data_error]: {bad}: line 2: label 'unsure' is not in the label set of task cb "
        f"(task.labels: entailment, contradiction, neutral)"
    )


# -- PET templates and verbalizers on a tiny MLM -------------------------------------------------


@pytest.mark.parametrize("task", list(SHIPPED))
def test_pet_templates_compose_and_score_on_a_tiny_mlm(module_ptmlab_home, corpus, data_dir, tmp_path, task):
    """A fresh bert_tiny with its MLM head: the template fills with the task's two texts, the slot is the
    mask the head reads, and zero-shot prompting scores dev32 with the task's metrics."""
    from lightning_modules.heads.evaluation import evaluate
    from lightning_modules.stages.finetune import build_finetune
    from ptmlab.config import compose_config

    cfg = compose_config(
        [
            *tiny(
                corpus,
                f"task=superglue/{task}",
                "adaptation=prompt_zero_shot",
                f"task.data.dev={shipped(data_dir, task, 'dev32')}",
                "task.max_eval_samples=24",
            ),
            f"+run_dir={tmp_path}",
        ]
    )
    parts = build_finetune(cfg)
    tokenizer = parts.resolved.tokenizer
    encoded = parts.datamodule.encoder.encode([parts.task.train.examples[0].texts])[0]
    assert encoded["input_ids"][encoded["pool_index"]] == tokenizer.mask_token_id
    words = [w for words in parts.task.spec.prompt["verbalizer"].values() for w in words]
    assert {tokenizer.convert_ids_to_tokens(i[0]) for i in parts.adaptation.resolved["label_token_ids"]} == {
        w.lower() for w in words
    }
    metrics = evaluate(parts.model, parts.task, "dev", tokenizer=tokenizer)
    assert set(metrics) == set(parts.task.spec.metrics) and all(0.0 <= v <= 1.0 for v in metrics.values())


def test_prompt_finetune_trains_cb_with_three_label_words(module_ptmlab_home, corpus, tmp_path):
    from lightning_modules.stages.finetune import run_finetune
    from ptmlab.config import compose_config

    summary = run_finetune(
        compose_config([*tiny(corpus, "task=superglue/cb", "adaptation=prompt_finetune"), f"+run_dir={tmp_path}"])
    )
    assert summary["adaptation"] == "prompt_finetune" and summary["steps"] == 3
    assert (
        set(summary["metrics"]) == {"accuracy", "macro_f1"} and summary["main_score"] == summary["metrics"]["accuracy"]
    )
