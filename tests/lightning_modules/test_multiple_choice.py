"""Multiple choice (issue 23, item 3) with tiny models: the JSONL reader (choices as a list, as fields,
SWAG's ending{i}, COPA's connectives, a seeded split of a validation set), bad rows (one line naming file
and row, before anything trains), a tiny GPT pre-trained here scored zero-shot exactly as the summed
log-probabilities computed by hand from its logits (acc and acc_norm), an encoder that learns a synthetic
set well above chance, the choice head under full, LoRA and BitFit, the decoder fine-tuned on its
log-likelihoods, the task-model round trip in a fresh process (identical choice scores), COPA through
`task=superglue/copa` (on a seeded split of its validation set, marked in the summary) and its leaderboard
cell, a Hugging Face GPT-2 scored with its own LM head. No accuracy claim on COPA: there is no training set."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import pytest
import torch

from lightning_modules.data.choice_jsonl import MultipleChoiceReader
from ptmlab.contracts import ConfigError, DataError

FILLER = "the a of in on at to was is and with from by for as it this that we they".split()
NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
QUESTION = "which one is a name ?"
CHOICES = 4


def synthetic_rows(n: int, seed: int) -> list[dict]:
    """Each row: a question and four words, one of them a name (the answer), the others filler; the
    answer's place is drawn, so only reading the choices finds it."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        choices = rng.sample(FILLER, CHOICES - 1)
        label = rng.randrange(CHOICES)
        choices.insert(label, rng.choice(NAMES))
        rows.append(
            {
                "id": f"r{seed}-{i}",
                "context": f"{' '.join(rng.sample(FILLER, 3))} {QUESTION}",
                "choices": choices,
                "label": label,
            }
        )
    return rows


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


# -- reader ------------------------------------------------------------------------------------


def test_reader_reads_lists_fields_and_swag_endings(tmp_path):
    rows = synthetic_rows(5, 0)
    rows[2]["choices"] = rows[2]["choices"][:3]  # fewer choices in one row: padded, never scored
    plain = write_jsonl(tmp_path / "plain.jsonl", rows)
    data = MultipleChoiceReader(plain, plain, id_field="id").read()
    ex = data.splits["train"].examples[0]
    assert (ex.context, list(ex.choices), ex.label, ex.row, ex.id) == (
        rows[0]["context"],
        rows[0]["choices"],
        rows[0]["label"],
        1,
        "r0-0",
    )
    assert len(data.splits["dev"].examples[2].choices) == 3 and data.eval_splits == ["dev"]
    swag = [
        {"sent1": "She opens the door.", "sent2": "She", **{f"ending{i}": f"walks {i}" for i in range(4)}, "label": "2"}
    ]
    path = write_jsonl(tmp_path / "swag.jsonl", swag)
    (ex,) = (
        MultipleChoiceReader(path, path, context_field=["sent1", "sent2"], choices_field="ending{i}")
        .read_split("dev", path)
        .examples
    )
    assert (ex.context, ex.choices, ex.label) == ("She opens the door. She", tuple(f"walks {i}" for i in range(4)), 2)


def test_reader_reads_copa_as_lm_evaluation_harness_builds_it(data_dir):
    from omegaconf import OmegaConf

    node = OmegaConf.load("conf/task/superglue/copa.yaml").data
    folder = data_dir / "superglue" / "COPA"
    reader = MultipleChoiceReader(
        str(folder / "train.jsonl"),
        str(folder / "val.jsonl"),
        context_field="premise",
        choices_field=list(node.choices_field),
        id_field="idx",
        connective_field="question",
        connectives=dict(node.connectives),
    )
    data = reader.read()
    assert (len(data.splits["train"]), len(data.splits["dev"])) == (32, 100)
    first = data.splits["dev"].examples[0]  # {"premise": "The man turned on the faucet.", "question": "effect", ...}
    assert first.context == "The man turned on the faucet so" and first.id == "0" and first.label == 1
    assert first.choices == ("the toilet filled with water.", "water flowed from the spout.")
    # the seeded split of a validation-only set: disjoint, seeded, marked as the split's origin
    split = MultipleChoiceReader(
        "unused",
        str(folder / "val.jsonl"),
        context_field="premise",
        choices_field=["choice1", "choice2"],
        train_from_dev=60,
        split_seed=3,
    ).read()
    again = MultipleChoiceReader(
        "unused",
        str(folder / "val.jsonl"),
        context_field="premise",
        choices_field=["choice1", "choice2"],
        train_from_dev=60,
        split_seed=3,
    ).read()
    train_rows = [ex.row for ex in split.splits["train"].examples]
    assert len(train_rows) == 60 and len(split.splits["dev"]) == 40
    assert train_rows == [ex.row for ex in again.splits["train"].examples]
    assert not set(train_rows) & {ex.row for ex in split.splits["dev"].examples}
    assert split.origin["train"].startswith("seeded split of ") and "seed 3" in split.origin["train"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda r: r.update(choices=r["choices"][:1]),
            r"bad.jsonl: line 2: 1 choice\(s\); a multiple-choice row needs at least 2",
        ),
        (lambda r: r.update(label=4), r"bad.jsonl: line 2: label 4 is not a choice index 0..3"),
        (lambda r: r.pop("context"), r"bad.jsonl: line 2: field \"context\" is missing"),
        (lambda r: r.pop("label"), r"bad.jsonl: line 2: field \"label\" \(the right choice\) is missing"),
        (
            lambda r: r["choices"].__setitem__(1, ""),
            r"bad.jsonl: line 2: choice \"choices\[1\]\" is '', not a non-empty string",
        ),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path, mutate, message):
    rows = synthetic_rows(3, 0)
    mutate(rows[1])
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(DataError, match=message) as caught:
        MultipleChoiceReader(path, path).read()
    assert "\n" not in str(caught.value)


# -- runs: an encoder, a pre-trained GPT zero-shot and fine-tuned, COPA ---------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mc")
    write_jsonl(folder / "train.jsonl", synthetic_rows(128, 1))
    write_jsonl(folder / "dev.jsonl", synthetic_rows(32, 2))
    corpus = folder / "corpus"
    corpus.mkdir()
    rng = random.Random(0)
    lines = [f"{' '.join(rng.sample(FILLER, 4))} {QUESTION} {rng.choice(NAMES)} ." for _ in range(400)]
    (corpus / "doc.txt").write_text("\n".join(lines) + "\n")
    return folder


def common(files) -> list[str]:
    return [
        "stage=finetune",
        "data=text_files",
        f"data.corpus.path={files / 'corpus'}",
        "tokenizer.min_frequency=1",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
        "seed=5",
        "stage.batch_size=16",
    ]


def synthetic_task(files) -> list[str]:
    return [
        "task=multiple_choice",
        f"task.data.train={files / 'train.jsonl'}",
        f"task.data.dev={files / 'dev.jsonl'}",
        "task.data.id_field=id",
        "task.max_length=32",
    ]


FEW = ["task.max_train_samples=32", "stage.epochs=2", "stage.lr=1e-2"]  # moves the head, not meant to learn
ENCODER = ["model=bert_tiny", "backbone=random", "objective=mlm", "tokenizer.vocab_size=120"]
GPT = [
    "model=gpt_tiny",
    "objective=clm",
    "tokenizer=bpe",
    "tokenizer.vocab_size=320",
    "model.backbone.dropout=0.0",
    "model.backbone.attention_dropout=0.0",
]


def run_overrides(files, name: str, gpt_run=None) -> list[str]:
    decoder = [*GPT, f"backbone={gpt_run}"] if gpt_run is not None else []
    return {
        "full": [
            *common(files),
            *synthetic_task(files),
            *ENCODER,
            "adaptation=full",
            "stage.epochs=3",
            "stage.lr=2e-3",
        ],
        "lora": [
            *common(files),
            *synthetic_task(files),
            *ENCODER,
            "adaptation=lora",
            "adaptation.rank=4",
            "adaptation.merge=false",
            *FEW,
        ],
        "bitfit": [*common(files), *synthetic_task(files), *ENCODER, "adaptation=bitfit", *FEW],
        "gpt_zero_shot": [*common(files), *synthetic_task(files), *decoder, "adaptation=zero_shot"],
        "gpt_full": [
            *common(files),
            *synthetic_task(files),
            *decoder,
            "adaptation=full",
            "task.max_train_samples=32",
            "stage.epochs=2",
            "stage.lr=1e-3",
        ],
        # the seeded split of val.jsonl (the FewGLUE train.jsonl is read in the reader test above)
        "copa": [
            *common(files),
            "task=superglue/copa",
            "task.data.train_from_dev=50",
            *ENCODER,
            "adaptation=full",
            "stage.epochs=1",
        ],
    }[name]


@pytest.fixture(scope="module")
def gpt_run(module_ptmlab_home, files, tmp_path_factory):
    """gpt_tiny pre-trained with CLM for 30 steps on the corpus: its log-likelihoods are no longer uniform."""
    from lightning_modules.stages.pretrain import run_pretrain
    from ptmlab.config import compose_config

    run_dir = tmp_path_factory.mktemp("gpt") / "run"
    run_pretrain(
        compose_config(
            [
                "stage=pretrain",
                *GPT,
                "data=text_files",
                f"data.corpus.path={files / 'corpus'}",
                "tokenizer.min_frequency=1",
                "data.block_size=32",
                "data.batch_size=16",
                "trainer.max_steps=30",
                "trainer.val_check_interval=30",
                "trainer.limit_val_batches=1",
                "checkpoint_every_n_steps=0",
                "optimizer.lr=3e-3",
                "trainer.enable_progress_bar=false",
                "seed=3",
                f"+run_dir={run_dir}",
            ]
        )
    )
    return run_dir


@pytest.fixture(scope="module")
def runs(module_ptmlab_home, files, gpt_run, tmp_path_factory):
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.evaluation import evaluate, predict
    from lightning_modules.stages.finetune import build_finetune, run_finetune
    from ptmlab.config import compose_config

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bit-equality across processes wants the same reduction order
    folder, out = tmp_path_factory.mktemp("runs"), {}
    try:
        for name in ("full", "lora", "bitfit", "gpt_zero_shot", "gpt_full", "copa"):
            overrides, run_dir = run_overrides(files, name, gpt_run), folder / name
            run_finetune(compose_config([*overrides, f"+run_dir={run_dir}"]))
            initial = build_finetune(compose_config([*overrides, f"+run_dir={folder / 'scratch'}"]))
            loaded = load_task_model(str(run_dir))
            out[name] = {
                "run_dir": run_dir,
                "summary": json.loads((run_dir / "summary.json").read_text()),
                "parts": initial,
                "loaded": loaded,
                "scores": predict(loaded, initial.task, "dev"),
                "metrics": evaluate(loaded, initial.task, "dev"),
            }
    finally:
        torch.set_num_threads(threads)
    return out


def prediction_rows(run, task_name: str) -> list[dict]:
    lines = (run["run_dir"] / "predictions" / f"dev.{task_name}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_zero_shot_scores_are_the_summed_log_probabilities_computed_by_hand(runs, files):
    run = runs["gpt_zero_shot"]
    parts, summary = run["parts"], run["summary"]
    backbone, tokenizer = parts.resolved.backbone.eval(), parts.resolved.tokenizer
    assert backbone.is_causal and summary["steps"] == 0 and summary["trainable_params"] == 0
    assert summary["multiple_choice"] == {"scoring": "log_likelihood", "normalisation": "characters"}
    dev = parts.task.data.splits["dev"]
    embedding = backbone.get_input_embeddings().weight
    hand, hand_norm = [], []
    with torch.no_grad():
        for ex in dev.examples:
            row = []
            context = tokenizer(ex.context, add_special_tokens=False)["input_ids"]
            for choice in ex.choices:
                whole = tokenizer(f"{ex.context} {choice}", add_special_tokens=False)["input_ids"]
                assert whole[: len(context)] == context  # the context's tokens are the pair's first ones
                ids = torch.tensor([[tokenizer.bos_token_id or tokenizer.cls_token_id, *whole]])
                assert ids.size(1) <= parts.task.spec.max_length  # nothing cut: the whole context is read
                logits = backbone(ids, attention_mask=torch.ones_like(ids)).last_hidden_state @ embedding.T  # 1×T×V
                log_probs = torch.log_softmax(logits[0, :-1].double(), dim=-1)  # position t-1 predicts token t
                row.append(sum(float(log_probs[t - 1, ids[0, t]]) for t in range(1 + len(context), ids.size(1))))
            hand.append(row)
            hand_norm.append([s / len(c) for s, c in zip(row, ex.choices, strict=True)])
    rows = prediction_rows(run, "multiple_choice")
    assert [r["id"] for r in rows] == [ex.id for ex in dev.examples] and [r["label"] for r in rows] == [
        ex.label for ex in dev.examples
    ]
    for r, scores, norm in zip(rows, hand, hand_norm, strict=True):
        assert r["scores"] == pytest.approx(scores, abs=1e-4) and r["scores_norm"] == pytest.approx(norm, abs=1e-4)
        assert r["prediction"] == max(range(CHOICES), key=scores.__getitem__)
        assert r["prediction_norm"] == max(range(CHOICES), key=norm.__getitem__)
    labels = [ex.label for ex in dev.examples]
    acc = sum(max(range(CHOICES), key=s.__getitem__) == y for s, y in zip(hand, labels)) / len(labels)
    acc_norm = sum(max(range(CHOICES), key=s.__getitem__) == y for s, y in zip(hand_norm, labels)) / len(labels)
    assert summary["metrics"] == pytest.approx({"accuracy": acc, "accuracy_norm": acc_norm})
    # the scores are a trained model's: its likelihoods differ from choice to choice
    assert len({round(s, 3) for row in hand for s in row}) > len(hand)


@pytest.mark.parametrize("name", ["full", "lora", "bitfit", "gpt_full", "copa"])
def test_every_mode_trains_the_choice_scores_and_summarises(runs, name):
    from ptmlab.contracts.summaries import FinetuneSummary

    run = runs[name]
    summary = FinetuneSummary.model_validate(run["summary"])
    decoder = name.startswith("gpt")
    assert summary.main_metric == "accuracy" and summary.main_score == summary.metrics["accuracy"]
    assert set(summary.metrics) == {"accuracy", *(["accuracy_norm"] if decoder else [])}
    assert run["summary"]["multiple_choice"]["scoring"] == ("log_likelihood" if decoder else "head")
    assert summary.steps > 0
    if name in ("lora", "bitfit"):
        assert summary.trainable_params < summary.total_params
    initial, trained = run["parts"].model.state_dict(), run["loaded"].model.state_dict()
    if decoder:  # no head weights: the decoder itself moved
        assert any(not torch.equal(initial[k], trained[k]) for k in initial if k.startswith("backbone."))
    else:
        assert not torch.equal(trained["head.1.weight"], initial["head.1.weight"])
    assert run["metrics"] == pytest.approx(run["summary"]["metrics"])  # the export scores what validation did
    task = run["parts"].task
    rows = prediction_rows(run, task.spec.name)
    dev = task.data.splits["dev"]
    assert [r["id"] for r in rows] == [ex.id for ex in dev.examples]
    torch.testing.assert_close(
        torch.tensor([r["scores"] for r in rows], dtype=torch.float64), run["scores"].double(), atol=1e-5, rtol=0
    )
    assert [r["prediction"] for r in rows] == run["scores"].argmax(-1).tolist()


def test_an_encoder_learns_the_synthetic_set_well_above_chance(runs):
    assert runs["full"]["summary"]["metrics"]["accuracy"] >= 0.6  # chance: 0.25 (four choices)


def test_copa_runs_on_a_seeded_split_of_the_validation_set_marked_in_the_summary(runs):
    summary, rows = runs["copa"]["summary"], prediction_rows(runs["copa"], "copa")
    assert summary["task"] == "copa" and len(rows) == 50 and runs["copa"]["scores"].shape == (50, 2)
    assert summary["data_origin"] == runs["copa"]["parts"].task.data.origin
    assert (
        summary["data_origin"]["train"].startswith("seeded split of ")
        and "val.jsonl" in summary["data_origin"]["train"]
    )
    right = sum(r["prediction"] == r["label"] for r in rows)
    assert summary["metrics"]["accuracy"] == pytest.approx(right / 50)  # SuperGLUE's COPA metric


def test_the_leaderboard_shows_the_task_under_its_name(runs):
    from ptmlab.leaderboard.grouping import build_leaderboard
    from ptmlab.leaderboard.rendering import render_table

    board = build_leaderboard([runs["copa"]["summary"], runs["full"]["summary"]])
    assert {"copa", "multiple_choice"} <= set(board.tasks)
    cell = next(r.cells["copa"] for r in board.rows if "copa" in r.cells)
    accuracy = runs["copa"]["summary"]["metrics"]["accuracy"]
    assert cell.score.mean == pytest.approx(accuracy) and list(cell.metrics) == ["accuracy"]
    table = render_table(board)
    # COPA is a SuperGLUE task: its column is headed the way the benchmark names it ("COPA acc")
    assert "COPA acc" in table.splitlines()[0] and f"{100 * accuracy:.1f}" in table


FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    import torch
    from safetensors.torch import save_file
    torch.set_num_threads(1)
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.evaluation import predict
    from lightning_modules.tasks.spec import load_task
    from ptmlab.config import compose_config

    scores = {}
    for name, case in json.loads(sys.argv[1]).items():
        loaded = load_task_model(case["ref"])
        task = load_task(compose_config(case["overrides"]).task)
        scores[name] = predict(loaded, task, "dev").contiguous()
    save_file(scores, sys.argv[2])
""")


def test_saved_task_models_reload_in_a_fresh_process_with_identical_scores(
    runs, files, gpt_run, module_ptmlab_home, tmp_path
):
    from safetensors.torch import load_file

    cases = {
        name: {"ref": str(run["run_dir"]), "overrides": run_overrides(files, name, gpt_run)}
        for name, run in runs.items()
    }
    target = tmp_path / "scores.safetensors"
    env = {**os.environ, "PTMLAB_HOME": str(module_ptmlab_home)}
    proc = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, json.dumps(cases), str(target)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    reloaded = load_file(str(target))
    for name, run in runs.items():
        manifest = json.loads((run["run_dir"] / "export" / "task_model" / "task_model.json").read_text())
        assert manifest["tasks"][run["summary"]["task"]]["kind"] == "multiple_choice"
        assert torch.equal(reloaded[name], run["scores"]), name


def test_a_row_with_one_choice_is_one_line_in_the_preflight(files, module_ptmlab_home, tmp_path, monkeypatch):
    """In process, through what ptmlab.run calls before the training stack (`stage.preflight`); exit 2
    through the entry point is the finetune stage's one run (stage_preflight.py)."""
    from stage_preflight import error_line_before_work

    rows = synthetic_rows(6, 3)
    rows[4]["choices"] = rows[4]["choices"][:1]
    bad = write_jsonl(tmp_path / "one_choice.jsonl", rows)
    line = error_line_before_work([*run_overrides(files, "full"), f"task.data.dev={bad}"], monkeypatch)
    assert line.startswith("error[data_error]"), line
    assert "one_choice.jsonl: line 5: 1 choice(s); a multiple-choice row needs at least 2" in line


@pytest.mark.parametrize(
    "extra, message",
    [
        (["task.kind=classification"], "task.kind=classification needs a reader other than the multiple-choice one"),
        (
            ["task.metrics=[macro_f1]", "task.main_metric=macro_f1"],
            "task.metrics=macro_f1 is a classification metric but task.kind=multiple_choice",
        ),
        (["task.choice_scoring=logprob"], "task.choice_scoring"),
    ],
)
def test_bad_multiple_choice_configs_fail_at_compose_time(files, extra, message):
    from ptmlab.config import compose_config

    with pytest.raises(ConfigError, match=message):
        compose_config([*run_overrides(files, "full"), *extra])


def test_zero_shot_needs_a_decoder_and_multitask_refuses_the_kind(files, tmp_path):
    from lightning_modules.stages.finetune import build_finetune
    from ptmlab.config import compose_config

    with pytest.raises(ConfigError, match="adaptation=zero_shot scores choices by a causal decoder's log-likelihood"):
        build_finetune(compose_config([*run_overrides(files, "full"), "adaptation=zero_shot", f"+run_dir={tmp_path}"]))
    with pytest.raises(ConfigError, match="stage.tasks: superglue/copa is a multiple_choice task"):
        compose_config(["stage=multitask", "stage.tasks=[glue/sst2,superglue/copa]"])


def test_a_hugging_face_causal_lm_is_scored_with_its_own_lm_head(tmp_path):
    """A GPT-2 checkpoint (tiny, random, saved here): the choice scores are the log-probabilities of
    GPT2LMHeadModel's own logits, padding and all; an untied LM head is refused."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from lightning_modules.heads.multiple_choice_model import MultipleChoiceModel
    from lightning_modules.models.hf import HFBackbone

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=50, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    reference = GPT2LMHeadModel(config).eval()
    reference.save_pretrained(tmp_path / "gpt2")
    model = MultipleChoiceModel(HFBackbone(str(tmp_path / "gpt2")), scoring="log_likelihood").eval()
    # two examples, three and two choices; each sequence: context tokens then the choice's (target) tokens
    sequences = [
        ([1, 5, 6, 7], [8, 9]),
        ([1, 5, 6, 7], [10]),
        ([1, 5, 6, 7], [11, 12, 13]),
        ([1, 20], [21, 22]),
        ([1, 20], [23]),
    ]
    length = max(len(c) + len(t) for c, t in sequences)
    ids = torch.zeros(len(sequences), length, dtype=torch.long)
    attention, target = torch.zeros_like(ids), torch.zeros_like(ids, dtype=torch.bool)
    for i, (context, choice) in enumerate(sequences):
        n = len(context) + len(choice)
        ids[i, :n], attention[i, :n] = torch.tensor(context + choice), 1
        target[i, len(context) : n] = True
    batch = {
        "input_ids": ids,
        "attention_mask": attention,
        "target_mask": target,
        "choice_mask": torch.tensor([[True, True, True], [True, True, False]]),
        "pool_index": attention.sum(1) - 1,
    }
    with torch.no_grad():
        scores = model(batch)
        expected = []
        for context, choice in sequences:
            row = torch.tensor([context + choice])
            log_probs = reference(row).logits[0].double().log_softmax(-1)
            expected.append(sum(float(log_probs[t - 1, row[0, t]]) for t in range(len(context), row.size(1))))
    assert scores[1, 2] == float("-inf")
    torch.testing.assert_close(
        scores[batch["choice_mask"]].double(), torch.tensor(expected, dtype=torch.float64), atol=1e-4, rtol=0
    )
    GPT2LMHeadModel(
        GPT2Config(vocab_size=50, n_positions=32, n_embd=32, n_layer=1, n_head=2, tie_word_embeddings=False)
    ).save_pretrained(tmp_path / "untied")
    with pytest.raises(ConfigError, match="does not tie its LM head"):
        MultipleChoiceModel(HFBackbone(str(tmp_path / "untied")), scoring="log_likelihood")


@pytest.mark.parametrize("name", ["full", "gpt_full"])
def test_int8_of_a_multiple_choice_model_scores_what_it_measured(runs, files, name, tmp_path):
    """stage=compress on the choice head (an encoder's per-choice score, a decoder's log-likelihoods):
    measured per scored sequence, reloaded scoring exactly what the stage measured."""
    from compress_any_kind import check_reloads_as_measured, compress, task_overrides

    run = runs[name]
    summary = compress(
        run["run_dir"], tmp_path / "int8", "quantize_dynamic", task_overrides(run_overrides(files, name))
    )
    assert summary["main_metric"] == "accuracy" and summary["source"]["score"] == pytest.approx(
        run["metrics"]["accuracy"]
    )
    assert summary["edits"] == ["quantize"] and summary["size_ratio"] < 1
    check_reloads_as_measured(summary, run["parts"].task)
