"""Token classification (issue 23, item 1) with tiny random models: the CoNLL column and CoNLL-U
readers, the word-boundary encoder (labels on first sub-words), BIO repair, the seqeval metrics
against seqeval itself and hand-computed cases, the per-token head under every adaptation mode,
per-word prediction files, the task-model round trip (a fresh process gives bit-equal logits),
and bad input (one line naming file and row, exit 2, nothing trained). The MiniLM threshold on
WNUT-17 is tests/e2e/test_wnut17_minilm.py."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap

import pytest
import torch
from seqeval.metrics import f1_score
from seqeval.scheme import IOB2

from lightning_modules.data.conll_columns import ConllReader
from lightning_modules.data.conllu_tags import ConlluTagReader
from lightning_modules.data.tagged import repair_bio
from lightning_modules.tasks.token_metrics import token_metrics
from ptmlab.contracts import ConfigError, DataError

WORDS = "the a visit saw met in near from and with today was".split()
NAMES = {"person": ["alice", "bob"], "location": ["paris", "new york"], "corporation": ["acme corp"]}


def synthetic_conll(path, sentences: int, seed: int) -> None:
    """Sentences of filler words and multi-word entities, IOB2-tagged, with the format's noise:
    a -DOCSTART- line, a comment, a hashtag word, whitespace-only sentence breaks."""
    rng = random.Random(seed)
    lines = ["-DOCSTART-\tO", "", "# a comment line"]
    for n in range(sentences):
        for _ in range(rng.randint(3, 8)):
            if rng.random() < 0.3:
                kind = rng.choice(sorted(NAMES))
                for i, word in enumerate(rng.choice(NAMES[kind]).split()):
                    lines.append(f"{word}\t{'B' if i == 0 else 'I'}-{kind}")
            else:
                lines.append(f"{rng.choice(WORDS)}\tO")
        lines.append("#tagged\tO")
        lines.append("\t" if n % 2 else "")
    path.write_text("\n".join(lines) + "\n")


# -- readers -----------------------------------------------------------------------------------


def test_conll_reader_skips_comments_and_docstart_and_keeps_hashtags(tmp_path):
    synthetic_conll(tmp_path / "train.conll", 6, 0)
    (tmp_path / "dev.txt").write_text(
        "-DOCSTART- -X- O O\n\nEU NNP B-NP I-ORG\nrejects VBZ B-VP O\n\nGerman JJ B-NP I-MISC\ncall NN I-NP O\n"
    )
    data = ConllReader(str(tmp_path / "train.conll"), str(tmp_path / "dev.txt")).read()
    train, dev = data.splits["train"], data.splits["dev"]
    assert len(train) == 6 and all(s.words[-1] == "#tagged" for s in train.examples)
    assert data.eval_splits == ["dev"] and dev.has_labels
    # whitespace-separated CoNLL-2003 (IOB1): the tag column is the last, repaired to IOB2
    assert dev.examples[0].words == ("EU", "rejects") and dev.examples[0].label == ("B-ORG", "O")
    assert dev.examples[1].label == ("B-MISC", "O") and dev.examples[1].row == 6
    pos = ConllReader(str(tmp_path / "train.conll"), str(tmp_path / "dev.txt"), label_column=1).read_split(
        "dev", tmp_path / "dev.txt"
    )
    assert pos.examples[0].label == ("NNP", "VBZ")  # not BIO: untouched


def test_conll_reader_one_column_file_is_unlabelled(tmp_path):
    synthetic_conll(tmp_path / "train.conll", 4, 0)
    (tmp_path / "test.txt").write_text("alice\nmet\nbob\n\nparis\n")
    data = ConllReader(str(tmp_path / "train.conll"), str(tmp_path / "train.conll"), str(tmp_path / "test.txt")).read()
    assert data.test_splits == ["test"] and not data.splits["test"].has_labels
    assert data.splits["test"].examples[1].words == ("paris",)


@pytest.mark.parametrize(
    "content, column, message",
    [
        ("a\tO\nb\tB-x\textra\n", -1, r"bad.conll: line 2 has 3 columns but line 1 has 2 \(ragged CoNLL rows\)"),
        ("a\tO\nb\tO\n", 3, r"bad.conll: line 1 has 2 columns; task.data.label_column=3 is outside them"),
    ],
)
def test_conll_reader_bad_input_names_file_and_line(tmp_path, content, column, message):
    (tmp_path / "bad.conll").write_text(content)
    with pytest.raises(DataError, match=message):
        ConllReader(str(tmp_path / "bad.conll"), str(tmp_path / "bad.conll"), label_column=column).read()
    with pytest.raises(DataError, match=r"missing.conll: CoNLL file not found \(task.data.train\)"):
        ConllReader(str(tmp_path / "missing.conll"), str(tmp_path / "bad.conll")).read()


def test_conllu_reader_takes_a_ud_column_as_the_label(tmp_path):
    (tmp_path / "t.conllu").write_text(
        textwrap.dedent("""\
        # sent_id = s1
        1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
        1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
        2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
        3\tgo\tgo\tVERB\tVB\tVerbForm=Inf\t0\troot\t_\t_

        1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_
        """).replace("\\t", "\t")
    )
    path = str(tmp_path / "t.conllu")
    data = ConlluTagReader(path, path).read()
    first = data.splits["train"].examples[0]
    assert first.words == ("do", "n't", "go") and first.label == ("AUX", "PART", "VERB") and first.id == "s1"
    assert first.columns[2] == ("3", "go", "_", "VERB", "VB", "VerbForm=Inf", "0", "root", "_", "_")
    assert ConlluTagReader(path, path, label_column="xpos").read().train.examples[1].label == ("UH",)
    with pytest.raises(ConfigError, match="task.data.label_column=lemma is not a CoNLL-U label column"):
        ConlluTagReader(path, path, label_column="lemma")


# -- BIO repair and metrics -----------------------------------------------------------------


def test_bio_repair_rules():
    assert repair_bio(["I-PER", "I-PER", "O", "I-LOC"]) == ["B-PER", "I-PER", "O", "B-LOC"]  # after O / at start
    assert repair_bio(["B-PER", "I-LOC", "I-LOC"]) == ["B-PER", "B-LOC", "I-LOC"]  # another type
    assert repair_bio(["B-PER", "I-PER", "B-PER"]) == ["B-PER", "I-PER", "B-PER"]  # valid IOB2 unchanged
    assert repair_bio(["NOUN", "VERB"]) == ["NOUN", "VERB"]


ALL = ["entity_f1", "entity_precision", "entity_recall", "entity_f1_strict", "token_accuracy"]


def test_metrics_hand_computed_edge_cases():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG"]]
    # empty prediction (all O): no entity found, F1 0, word accuracy 2/6 (the two gold O words)
    m = token_metrics(ALL, gold, [["O"] * 4, ["O"] * 2])
    assert m["entity_f1"] == 0.0 and m["entity_recall"] == 0.0 and m["token_accuracy"] == pytest.approx(2 / 6)
    # I- without B-: the default (conlleval) mode reads I-PER I-PER as the PER entity (3 of 3 right);
    # strict IOB2 drops the ill-formed span: 2 of 2 predicted right, 2 of 3 gold found -> F1 0.8
    pred = [["I-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG"]]
    m = token_metrics(ALL, gold, pred)
    assert m["entity_f1"] == 1.0 and m["entity_f1_strict"] == pytest.approx(0.8)
    # repairing the prediction makes strict agree with the default mode
    assert token_metrics(["entity_f1_strict"], gold, [repair_bio(p) for p in pred])["entity_f1_strict"] == 1.0
    # a wrong type and a wrong boundary: 1 of 3 predicted right, 1 of 3 gold found
    m = token_metrics(ALL, gold, [["B-PER", "O", "O", "B-PER"], ["O", "B-ORG"]])
    assert (m["entity_precision"], m["entity_recall"]) == (pytest.approx(1 / 3), pytest.approx(1 / 3))
    # no entities in gold nor prediction: 0, as seqeval says (never a division error)
    assert token_metrics(["entity_f1"], [["O"]], [["O"]]) == {"entity_f1": 0.0}
    with pytest.raises(ConfigError, match="unknown token-classification metric 'entity_f2'"):
        token_metrics(["entity_f2"], gold, gold)


def test_metrics_match_seqeval_on_random_tags():
    rng = random.Random(3)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(200)]
    pred = [[rng.choice(tags) for _ in g] for g in gold]
    gold = [repair_bio(g) for g in gold]
    m = token_metrics(ALL, gold, pred)
    assert m["entity_f1"] == pytest.approx(f1_score(gold, pred))
    assert m["entity_f1_strict"] == pytest.approx(f1_score(gold, pred, mode="strict", scheme=IOB2))
    assert m["entity_f1_strict"] < m["entity_f1"]  # random tags hold orphan I- tags


# -- encoder ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_wordpiece():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "new", "york", "run", "##ning", "a", "##b", "##c"]
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]"
    )


def test_encoder_labels_first_subwords_only(tiny_wordpiece):
    from lightning_modules.data.tagged import TaggedSentence
    from lightning_modules.data.task_data import Split
    from lightning_modules.tasks.token_encoding import WordTokenEncoder

    sentence = TaggedSentence(
        words=("running", "new", "york", "abc"), label=(0, 1, 2, 3), row=1, id="0", lines=(1, 2, 3, 4), columns=()
    )
    encoder = WordTokenEncoder(tiny_wordpiece, max_length=6)
    (item,) = encoder.encode_split(Split("dev", [sentence], "x", has_labels=True))
    # [CLS] run ##ning new york a [SEP]: cut at 6 -> [CLS] run ##ning new york [SEP]
    assert tiny_wordpiece.convert_ids_to_tokens(item["input_ids"]) == ["[CLS]", "run", "##ning", "new", "york", "[SEP]"]
    assert item["label"] == [-100, 0, -100, 1, 2, -100]
    assert item["word_start"] == [False, True, False, True, True, False]
    batch = encoder.collate(
        [
            item,
            {
                **item,
                "input_ids": item["input_ids"][:3],
                "token_type_ids": [0] * 3,
                "word_start": item["word_start"][:3],
                "label": item["label"][:3],
            },
        ]
    )
    assert batch["labels"].shape == (2, 6) and batch["labels"][1].tolist() == [-100, 0, -100, -100, -100, -100]
    assert batch["attention_mask"][1].tolist() == [1, 1, 1, 0, 0, 0]


def test_decoder_tags_truncated_words_o_and_writes_columns(tmp_path):
    from lightning_modules.data.tagged import TaggedSentence
    from lightning_modules.data.task_data import Split
    from lightning_modules.tasks.spec import TaskSpec
    from lightning_modules.tasks.tagged_predictions import word_tags, write_tagged_predictions

    spec = TaskSpec(
        name="ner",
        kind="token_classification",
        labels=("O", "B-PER", "I-PER"),
        metrics=("entity_f1",),
        main_metric="entity_f1",
        max_length=6,
    )
    words = ("alice", "smith", "sat", "down")
    split = Split(
        "dev",
        [
            TaggedSentence(
                words,
                (1, 2, 0, 0),
                1,
                "0",
                (1, 2, 3, 4),
                tuple((w, "X", t) for w, t in zip(words, ["B-PER", "I-PER", "O", "O"])),
            )
        ],
        "f",
        has_labels=True,
    )
    preds = torch.tensor([[-100, 2, 2, -100, 0, -100]])  # three words fit, an orphan I- predicted
    tags = word_tags(spec, split, preds)
    assert tags == [["I-PER", "I-PER", "O", "O"]]
    text = write_tagged_predictions(tmp_path / "dev.tsv", split, tags).read_text()
    assert text.splitlines() == [
        "alice\tX\tB-PER\tB-PER",
        "smith\tX\tI-PER\tI-PER",
        "sat\tX\tO\tO",
        "down\tX\tO\tO",
        "",
    ]  # written repaired, beside the input's columns


# -- finetune under every adaptation mode, round trip, bad input ---------------------------------

MODES = {
    "full": ["adaptation=full", "stage.epochs=10"],  # 10 epochs: see the F1 bar below
    "lora": ["adaptation=lora", "adaptation.rank=4", "adaptation.merge=false", "stage.lr=1e-2"],
    "bitfit": ["adaptation=bitfit", "stage.lr=1e-2"],
    "adapters": ["adaptation=adapters", "adaptation.bottleneck=8", "stage.lr=1e-2"],
    "prompt_tuning": ["adaptation=prompt_tuning", "adaptation.num_tokens=4", "stage.lr=1e-2"],
}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ner")
    synthetic_conll(folder / "train.conll", 48, 1)
    synthetic_conll(folder / "dev.conll", 16, 2)
    corpus = folder / "corpus"
    corpus.mkdir()
    (corpus / "doc.txt").write_text(" ".join(w for ws in NAMES.values() for w in ws) + " " + " ".join(WORDS * 20))
    return folder


def overrides(files, extra) -> list[str]:
    return [
        "stage=finetune",
        "task=ner",
        f"task.data.train={files / 'train.conll'}",
        f"task.data.dev={files / 'dev.conll'}",
        "task.max_length=24",
        "model=bert_tiny",
        "data=text_files",
        f"data.corpus.path={files / 'corpus'}",
        "tokenizer.vocab_size=80",
        "tokenizer.min_frequency=1",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
        "stage.lr=3e-3",
        "stage.batch_size=8",
        "stage.epochs=5",
        "seed=5",
        *extra,
    ]


@pytest.fixture(scope="module")
def runs(module_ptmlab_home, files, tmp_path_factory):
    from lightning_modules.heads.evaluation import evaluate, predict
    from lightning_modules.stages.finetune import build_finetune, run_finetune
    from ptmlab.config import compose_config

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # bit-equality across processes wants the same reduction order
    folder, out = tmp_path_factory.mktemp("runs"), {}
    try:
        for mode, extra in MODES.items():
            run_dir = folder / mode
            run_finetune(compose_config([*overrides(files, extra), f"+run_dir={run_dir}"]))
            summary = json.loads((run_dir / "summary.json").read_text())
            parts = build_finetune(compose_config([*overrides(files, extra), f"+run_dir={folder / 'scratch'}"]))
            state = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
            parts.model.load_state_dict({k[6:]: v for k, v in state["state_dict"].items() if k.startswith("model.")})
            parts.model.eval()
            tok = parts.resolved.tokenizer
            out[mode] = {
                "run_dir": run_dir,
                "summary": summary,
                "task": parts.task,
                "logits": predict(parts.model, parts.task, "dev", tokenizer=tok),
                "metrics": evaluate(parts.model, parts.task, "dev", tokenizer=tok),
            }
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.mark.parametrize("mode", list(MODES))
def test_every_adaptation_mode_trains_the_token_head_and_summarises(runs, mode):
    from ptmlab.contracts.summaries import FinetuneSummary

    run = runs[mode]
    summary = FinetuneSummary.model_validate(run["summary"])
    assert summary.main_metric == "entity_f1" and summary.main_score == summary.metrics["entity_f1"]
    assert set(summary.metrics) == {
        "entity_f1",
        "entity_precision",
        "entity_recall",
        "entity_f1_strict",
        "entity_precision_strict",
        "entity_recall_strict",
        "token_accuracy",
    }
    assert "strict" in run["summary"]["metric_modes"]["entity_*_strict"]
    if mode != "full":
        assert summary.trainable_params < summary.total_params
    # evaluate() on the model restored from the run's checkpoint scores what its validation loop reported
    assert run["metrics"] == pytest.approx(run["summary"]["metrics"])
    lines = (run["run_dir"] / "predictions" / "dev.ner.tsv").read_text().split("\n\n")
    dev = run["task"].data.splits["dev"]
    assert len([b for b in lines if b.strip()]) == len(dev)
    first = lines[0].splitlines()
    assert [row.split("\t")[0] for row in first] == list(dev.examples[0].words) and len(first[0].split("\t")) == 3
    assert run["logits"].shape == (len(dev), 24, len(run["task"].spec.labels))


def test_the_job_page_reads_a_runs_tagged_predictions(runs):
    # ptmlab.views.prediction_samples (GET /api/v1/jobs/{id}/predictions) on a real run's folder and
    # config.yaml: each sentence's words, the gold column as read, the tag written beside it
    from ptmlab.views.prediction_samples import prediction_splits, tag_columns, tagged_sentences

    run = runs["full"]
    assert run["summary"]["task_kind"] == "token_classification"
    folder = run["run_dir"] / "predictions"
    assert prediction_splits(folder, "token_classification", "ner") == ["dev"]
    sentences = list(tagged_sentences(folder / "dev.ner.tsv", *tag_columns(str(run["run_dir"]))))
    dev = run["task"].data.splits["dev"].examples
    assert [[w["word"] for w in s["words"]] for s in sentences] == [list(ex.words) for ex in dev]
    assert [[w["gold"] for w in s["words"]] for s in sentences] == [[cols[-1] for cols in ex.columns] for ex in dev]
    written = [line.split("\t")[-1] for line in (folder / "dev.ner.tsv").read_text().splitlines() if line]
    assert [w["predicted"] for s in sentences for w in s["words"]] == written
    assert sum(s["errors"] for s in sentences) == sum(
        w["gold"] != w["predicted"] for s in sentences for w in s["words"]
    )
    # the entity-level confusion stored with the run (and served beside the samples) is that of the
    # written tags, and its diagonal is the entity F1 the stage scored
    from lightning_modules.tasks.confusion import entity_confusion
    from ptmlab.views.prediction_samples import run_confusion

    report = run_confusion(str(run["run_dir"]))
    assert report == run["summary"]["confusion"] and report["level"] == "entity" and report["labels"][-1] == "O"
    gold, predicted = ([[w[k] for w in s["words"]] for s in sentences] for k in ("gold", "predicted"))
    assert entity_confusion(gold, predicted, [[w["word"] for w in s["words"]] for s in sentences]) == report
    types, matrix = len(report["labels"]) - 1, report["matrix"]
    right = sum(matrix[i][i] for i in range(types))
    found = sum(matrix[g][p] for g in range(types + 1) for p in range(types))
    assert report["examples"] == sum(map(sum, matrix[:types]))
    assert 2 * right / (report["examples"] + found) == pytest.approx(run["summary"]["metrics"]["entity_f1"])


def test_full_finetuning_learns_the_synthetic_entities(runs):
    # The WordPiece vocabulary is not the same in every session: `tokenizers` numbers its `##`
    # pieces in hash-map order and breaks merge ties by those ids (huggingface/tokenizers#1794).
    # With 5 epochs entity F1 ranged 0.49-0.64 over sessions (one CI failure); with 10 it ranged
    # 0.60-0.69 over 12 sessions.
    assert runs["full"]["summary"]["metrics"]["entity_f1"] > 0.5  # all-O scores 0


FRESH_PROCESS = textwrap.dedent("""
    import json, sys
    import torch
    from safetensors.torch import save_file
    torch.set_num_threads(1)
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.evaluation import predict
    from lightning_modules.tasks.spec import load_task
    from ptmlab.config import compose_config

    cases, out = json.loads(sys.argv[1]), {}
    for mode, case in cases.items():
        loaded = load_task_model(case["ref"])
        task = load_task(compose_config(case["overrides"]).task)
        assert loaded.task == task.spec
        out[mode] = predict(loaded, task, "dev").contiguous()
    save_file(out, sys.argv[2])
""")


def test_saved_task_models_reload_in_a_fresh_process_bit_equal(runs, files, module_ptmlab_home, tmp_path):
    from safetensors.torch import load_file

    cases = {
        mode: {"ref": str(run["run_dir"]), "overrides": overrides(files, MODES[mode])} for mode, run in runs.items()
    }
    target = tmp_path / "logits.safetensors"
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
    for mode, run in runs.items():
        manifest = json.loads((run["run_dir"] / "export" / "task_model" / "task_model.json").read_text())
        assert manifest["pooling"] == "tokens"
        assert torch.equal(reloaded[mode], run["logits"]), mode


BAD_CONLL = {
    "ragged": (lambda folder: [f"task.data.train={folder / 'ragged.conll'}"], "ragged.conll: line 2 has 3 columns"),
    "missing": (lambda folder: [f"task.data.dev={folder / 'missing.conll'}"], "missing.conll: CoNLL file not found"),
    "label column": (
        lambda folder: ["task.data.label_column=4"],
        "train.conll: line 4 has 2 columns; task.data.label_column=4",
    ),
}


def test_bad_conll_input_through_the_entry_point_is_one_line_and_exit_2(files, module_ptmlab_home, tmp_path):
    """The finetune stage's one run through `python -m ptmlab.run` (each costs its imports): exit 2 and
    one line from its preflight. The other cases, and other task kinds' bad input, in process
    (stage_preflight.py)."""
    (tmp_path / "ragged.conll").write_text("alice\tB-person\nsat\tO\textra\n")
    env = {**os.environ, "PTMLAB_HOME": str(module_ptmlab_home)}
    extra, named = BAD_CONLL["ragged"]
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "ptmlab.run", *overrides(files, extra(tmp_path)), f"hydra.run.dir={run_dir}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error[")]
    assert len(errors) == 1 and errors[0].startswith("error[data_error]") and named in errors[0], errors
    assert not (run_dir / "summary.json").exists() and not (run_dir / "checkpoints").exists()


@pytest.mark.parametrize("case", ["missing", "label column"])
def test_bad_conll_input_fails_in_the_preflight(case, files, module_ptmlab_home, tmp_path, monkeypatch):
    """What ptmlab.run calls before the training stack (`stage.preflight`), in process."""
    from lightning_modules.tasks.read_ahead import task_data
    from ptmlab.config import compose_config
    from ptmlab.errors import DataError
    from ptmlab.run import ptmlab_error_in_chain

    extra, named = BAD_CONLL[case]
    with pytest.raises(Exception) as raised:
        task_data(compose_config(overrides(files, extra(tmp_path))))
    error = ptmlab_error_in_chain(raised.value)  # as ptmlab.run reports it, not Hydra's instantiate wrapper
    assert isinstance(error, DataError) and named in str(error) and "\n" not in str(error)


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ["task.kind=classification", "task.metrics=[accuracy]", "task.main_metric=accuracy"],
            "task.kind=classification needs a sentence reader",
        ),
        (
            ["task.metrics=[accuracy]", "task.main_metric=accuracy"],
            "task.metrics=accuracy is a classification metric but task.kind=token_classification",
        ),
        (
            ["task.data.token_column=1", "task.data.label_column=1"],
            "token_column and task.data.label_column are both 1",
        ),
    ],
)
def test_bad_token_task_configs_fail_at_compose_time(files, extra, message):
    from ptmlab.config import compose_config

    with pytest.raises(ConfigError, match=message):
        compose_config(overrides(files, extra))


def test_multitask_refuses_a_token_task_at_compose_time():
    from ptmlab.config import compose_config

    with pytest.raises(ConfigError, match="stage.tasks: ner/wnut17 is a token_classification task"):
        compose_config(["stage=multitask", "stage.tasks=[glue/sst2,ner/wnut17]"])


# -- compression of the token head (stage=compress on the full fine-tune) ------------------------


@pytest.mark.parametrize("method", ["quantize_dynamic", "drop_layers", "prune_magnitude", "distill"])
def test_every_compression_method_takes_the_token_head(method, runs, files, tmp_path):
    from compress_any_kind import check_reloads_as_measured, compress, task_overrides

    full = runs["full"]
    summary = compress(full["run_dir"], tmp_path / method, method, task_overrides(overrides(files, MODES["full"])))
    assert summary["main_metric"] == "entity_f1" and summary["source"]["score"] == pytest.approx(
        full["summary"]["metrics"]["entity_f1"]
    )
    check_reloads_as_measured(summary, full["task"])
    if method == "distill":  # per-token soft targets on a one-layer student, beside its no-teacher control
        assert summary["student_layers"] == 1 and summary["control_score"] is not None
        assert summary["compressed"]["params"] < summary["source"]["params"]
