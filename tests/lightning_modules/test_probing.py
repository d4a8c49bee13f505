"""Probing without MiniLM: the CoNLL-U reader (multiword tokens, empty nodes, malformed lines),
control tasks, the structural-probe scoring (MST, UUAS), LAMA reading and P@k checked by hand on
a ptmlab-pretrained tiny MLM, the sentence and attention suites end to end on that tiny model,
bad input refused before any extraction (exit 2 through `python -m ptmlab.run`), and the
`ptmlab cache` command. MiniLM thresholds and the cache across jobs: test_probing_minilm.py."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from lightning_modules.data.conllu import read_conllu
from lightning_modules.probing import cloze, structural
from lightning_modules.probing.activations import FORWARD_PASSES
from lightning_modules.probing.token import control_labels
from ptmlab.config import compose_config
from ptmlab.contracts import ConfigError, DataError, ProbeSummary, PtmlabError

REPO = Path(__file__).resolve().parents[2]
LAMA = REPO / "tests" / "fixtures" / "lama"

SAMPLE = """# sent_id = s1
# text = I don't know.
1	I	I	PRON	PRP	Case=Nom|Number=Sing|Person=1	3	nsubj	3:nsubj	_
2-3	don't	_	_	_	_	_	_	_	_
2	do	do	AUX	VBP	Mood=Ind|Tense=Pres	4	aux	4:aux	_
3	n't	not	PART	RB	_	4	advmod	4:advmod	_
4	know	know	VERB	VB	VerbForm=Inf	0	root	0:root	_
4.1	knows	know	VERB	VBZ	_	_	_	4:conj	CopyOf=4
5	.	.	PUNCT	.	_	4	punct	4:punct	_

# sent_id = s2
1	Cats	cat	NOUN	NNS	Number=Plur	2	nsubj	2:nsubj	_
2	sleep	sleep	VERB	VBP	Tense=Pres	0	root	0:root	_

"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- the CoNLL-U reader ------------------------------------------------------------------------


def test_multiword_tokens_and_empty_nodes_follow_the_ud_format(tmp_path):
    bank = read_conllu(write(tmp_path, "a.conllu", SAMPLE))
    first, second = bank.sentences
    assert first.words == ["I", "do", "n't", "know", "."]  # the words, not the token "don't"; no 4.1
    assert first.heads == [3, 4, 4, 0, 4] and first.deprels[1] == "aux"
    assert first.sent_id == "s1" and first.text == "I don't know."
    assert first.feats[1] == {"Mood": "Ind", "Tense": "Pres"}
    assert first.depths() == [2, 1, 1, 0, 1]
    assert first.is_punct == [False, False, False, False, True]
    assert second.words == ["Cats", "sleep"] and second.line == 12


@pytest.mark.parametrize(
    "bad, expected",
    [
        ("1\tI\tI\tPRON\tPRP\t_\t0\troot\t_\n", "a.conllu:11: expected 10 tab-separated fields, found 9"),
        ("x\tI\tI\tPRON\tPRP\t_\t0\troot\t_\t_\n", "a.conllu:11: malformed ID 'x'"),
        ("3\tI\tI\tPRON\tPRP\t_\t0\troot\t_\t_\n", "a.conllu:11: word ID 3 out of sequence (expected 1)"),
        ("1\tI\tI\tPRON\tPRP\t_\tx\troot\t_\t_\n", "a.conllu:11: HEAD 'x' is not an integer"),
        ("1\tI\tI\tPRON\tPRP\t_\t7\troot\t_\t_\n", "a.conllu:11: HEAD 7 beyond the sentence's 1 words"),
        ("1\tI\tI\tPRON\tPRP\tCase\t0\troot\t_\t_\n", "a.conllu:11: FEATS item 'Case' is not Name=Value"),
    ],
)
def test_a_malformed_line_is_named_by_file_and_line(tmp_path, bad, expected):
    path = write(tmp_path, "a.conllu", SAMPLE.split("\n# sent_id = s2")[0] + "\n" + bad + "\n")
    with pytest.raises(DataError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        read_conllu(path)


def test_the_real_treebank_reads_whole(data_dir):
    dev = read_conllu(data_dir / "ud" / "en_ewt" / "en_ewt-ud-dev.conllu")
    assert len(dev) == 2001  # MANIFEST.md
    assert all(len(s.words) == len(s.heads) == len(s.upos) for s in dev.sentences)
    assert sum(h == 0 for s in dev.sentences for h in s.heads) == 2001  # one root per sentence
    assert len(read_conllu(data_dir / "ud" / "en_ewt" / "en_ewt-ud-train.conllu", max_sentences=10)) == 10


# -- control task, structural scoring ---------------------------------------------------------


def test_control_labels_are_one_per_word_type_from_the_empirical_distribution():
    rng = random.Random(0)
    types = [f"w{rng.randrange(2000)}" for _ in range(20000)]
    labels = [rng.choices(["NOUN", "VERB", "DET"], [0.6, 0.3, 0.1])[0] for _ in types]
    c_train, c_eval = control_labels(types, ["w1", "unseen"], labels, seed=3)
    by_type = {}
    for t, c in zip(types, c_train):
        assert by_type.setdefault(t, c) == c  # a word type always gets the same control label
    assert c_eval[0] == by_type["w1"]
    shares = Counter(by_type.values())
    assert abs(shares["NOUN"] / len(by_type) - 0.6) < 0.05 and abs(shares["DET"] / len(by_type) - 0.1) < 0.05
    assert control_labels(types, [], labels, seed=3)[0] == c_train  # seeded
    assert control_labels(types, [], labels, seed=4)[0] != c_train


def test_tree_distances_mst_and_uuas_by_hand():
    heads = [2, 0, 2, 3]  # w1 <- w2 (root) -> w3 -> w4
    dist = structural.tree_distances(heads)
    assert dist.tolist() == [[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0]]
    assert structural.minimum_spanning_tree(dist.astype(float)) == {(0, 1), (1, 2), (2, 3)}
    noisy = dist.astype(float)
    noisy[0, 2] = noisy[2, 0] = 0.5  # the probe thinks w1 is closest to w3 ...
    noisy[0, 1] = noisy[1, 0] = 2.0  # ... and far from w2
    assert structural.minimum_spanning_tree(noisy) == {(0, 2), (1, 2), (2, 3)}
    rows = structural._row_spearmans(dist.astype(float), dist.astype(float))
    assert np.allclose(rows, 1.0)


# -- LAMA ----------------------------------------------------------------------------------------


def test_lama_records_templates_and_errors(tmp_path):
    data = cloze.read_lama(str(LAMA))
    by_subject = {f.subject: f for f in data.facts}
    assert len(data.facts) == 8
    assert by_subject["tom"].sentence == "tom was born in [MASK] ." and by_subject["tom"].relation == "P19"
    assert by_subject["italy"].sentence == "the capital of italy is [MASK] ."
    assert by_subject["anna"].sentence == "anna was born in [MASK] ."
    bad = write(
        tmp_path,
        "P1.jsonl",
        '{"sub_label": "a", "obj_label": "b", "masked_sentences": ["a [MASK]"]}\n{"sub_label": "a"}\n',
    )
    with pytest.raises(DataError, match=r"P1.jsonl:2: missing 'obj_label'"):
        cloze.read_lama(str(bad))
    write(tmp_path, "P2.jsonl", "{not json\n")
    with pytest.raises(DataError, match=r"P2.jsonl: line 1 is not JSON"):
        cloze.read_lama(str(tmp_path / "P2.jsonl"))


LAMA_CORPUS = ["{s} was born in {o} .", "the capital of {c} is {o} .", "{s} lives in {o} .", "{o} is a city ."]
PEOPLE = {"anna": "paris", "tom": "rome", "mia": "berlin", "leo": "paris", "eva": "rome", "max": "berlin"}
COUNTRIES = {"france": "paris", "italy": "rome", "germany": "berlin"}


@pytest.fixture(scope="module")
def home(module_ptmlab_home):
    return module_ptmlab_home


@pytest.fixture(scope="module")
def tiny_mlm(home, tmp_path_factory):
    """A bert_tiny pretrained with MLM for a few hundred steps on sentences about the fixture's
    facts: its run folder (config.yaml, checkpoints/last.ckpt, export/)."""
    from lightning_modules.stages.pretrain import run_pretrain

    rng = random.Random(0)
    corpus = tmp_path_factory.mktemp("lama_corpus")
    lines = []
    for _ in range(400):
        s, o = rng.choice(list(PEOPLE.items()))
        c, co = rng.choice(list(COUNTRIES.items()))
        lines.append(f"{s} was born in {o} . the capital of {c} is {co} . {s} lives in {o} .")
    (corpus / "doc.txt").write_text("\n".join(lines) + "\n")
    run_dir = tmp_path_factory.mktemp("tiny_mlm") / "run"
    cfg = compose_config(
        [
            "stage=pretrain",
            "model=bert_tiny",
            "objective=mlm",
            "data=text_files",
            f"data.corpus.path={corpus}",
            "data.block_size=32",
            "data.batch_size=16",
            "tokenizer.vocab_size=120",
            "tokenizer.min_frequency=1",
            "trainer.max_steps=150",
            "trainer.limit_val_batches=0",
            "trainer.enable_progress_bar=false",
            "checkpoint_every_n_steps=0",
            "optimizer.lr=3e-3",
            "scheduler=constant",
            f"+run_dir={run_dir}",
        ]
    )
    run_pretrain(cfg)
    return run_dir


def probe_cfg(run_dir: Path, *overrides: str):
    return compose_config(["stage=probe", "model=bert_tiny", f"+run_dir={run_dir}", *overrides])


def test_lama_p_at_k_checked_by_hand(tiny_mlm, tmp_path):
    from lightning_modules.artifacts.backbone_export import load_exported_backbone
    from lightning_modules.objectives.mlm import MaskedLMHead
    from lightning_modules.stages.probe import run_probe

    summary = run_probe(probe_cfg(tmp_path / "probe", "probe=lama", f"probe.data.path={LAMA}", f"backbone={tiny_mlm}"))
    ProbeSummary.model_validate(summary)
    (task,) = summary["tasks"]
    relations = {r["relation"]: r for r in task["relations"]}
    # reykjavikurborg and xyzzyplugh are not in a 120-token vocabulary: counted, not scored
    assert relations["P19"]["facts"] == 4 and relations["P19"]["oov"] == 1 and relations["P19"]["scored"] == 3
    assert relations["P36"]["facts"] == 4 and relations["P36"]["oov"] == 1 and relations["P36"]["scored"] == 3
    assert task["oov"] == 2 and task["scored"] == 6

    # By hand: the backbone from the export, the head from the checkpoint, one sentence at a time.
    backbone, _, tokenizer = load_exported_backbone(tiny_mlm / "export")
    backbone.eval()
    state = torch.load(tiny_mlm / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)["state_dict"]
    head = MaskedLMHead(
        backbone.hidden_size,
        backbone.get_input_embeddings().weight.shape[1],
        len(tokenizer),
        activation=backbone.activation,
        layer_norm_eps=backbone.layer_norm_eps,
    )
    head.load_state_dict(
        {k[len("objectives.mlm.head.") :]: v for k, v in state.items() if k.startswith("objectives.mlm.head.")}
    )
    head.eval()
    ranks: dict[str, list[int]] = {"P19": [], "P36": []}
    facts = [
        ("P19", "anna was born in [MASK] .", "paris"),
        ("P19", "tom was born in [MASK] .", "rome"),
        ("P19", "mia was born in [MASK] .", "berlin"),
        ("P36", "the capital of france is [MASK] .", "paris"),
        ("P36", "the capital of italy is [MASK] .", "rome"),
        ("P36", "the capital of germany is [MASK] .", "berlin"),
    ]
    with torch.no_grad():
        for rel, sentence, obj in facts:
            ids = tokenizer(sentence.replace("[MASK]", tokenizer.mask_token), return_tensors="pt")["input_ids"]
            position = int((ids[0] == tokenizer.mask_token_id).nonzero()[0])
            logits = head(backbone(ids).last_hidden_state[0, position], backbone.get_input_embeddings().weight)
            gold = tokenizer.convert_tokens_to_ids(obj)
            order = logits.argsort(descending=True).tolist()
            ranks[rel].append(order.index(gold) + 1)
    for rel, rs in ranks.items():
        assert relations[rel]["p_at_1"] == pytest.approx(sum(r == 1 for r in rs) / 3, abs=1e-4)
        assert relations[rel]["p_at_10"] == pytest.approx(sum(r <= 10 for r in rs) / 3, abs=1e-4)
        assert relations[rel]["mrr"] == pytest.approx(sum(1 / r for r in rs) / 3, abs=1e-4)
    # the model learnt the facts it was trained on: well above chance (1/120)
    assert task["p_at_10"] >= 0.5, ranks


def test_sentence_and_attention_suites_run_on_a_ptmlab_tiny_model(tiny_mlm, tmp_path, data_dir):
    from lightning_modules.stages.probe import run_probe

    small = [
        "probe.data.max_train_sentences=200",
        "probe.data.max_eval_sentences=80",
        "probe.data.max_sentence_words=30",
        "stage.token.epochs=2",
        f"backbone={tiny_mlm / 'export'}",
        f"paths.cache_dir={tmp_path / 'cache'}",
    ]
    summary = run_probe(probe_cfg(tmp_path / "sentence", "probe=sentence", *small))
    ProbeSummary.model_validate(summary)
    tasks = {t["probe_task"]: t for t in summary["tasks"]}
    assert set(tasks) == {"sentence_length", "tree_depth", "bigram_shift", "tense", "subject_number"}
    for t in tasks.values():
        assert [e["layer"] for e in t["layers"]] == [0, 1, 2]  # bert_tiny: embeddings + 2 layers
        assert all(0.0 <= e["accuracy"] <= 1.0 for e in t["layers"])
        assert 0.0 < t["baselines"]["majority"] < 1.0 and t["random_init"]["layers"]
    assert tasks["tense"]["eval_examples"] < 80  # sentences without a tense are left out
    # bigram shift reads its own extraction (the shifted sentences) for both models
    assert len(summary["extraction"]["bert_tiny"]["datasets"]) == 4

    summary = run_probe(
        probe_cfg(tmp_path / "attention", "probe=attention", *small, "stage.attention.max_sentences=40")
    )
    (attention,) = summary["tasks"]
    stats = {h["statistic"]: h["values"] for h in attention["heatmaps"]}
    assert {"entropy", "cls", "sep", "punct", "prev", "next", "dep:all", "dep:nsubj"} <= set(stats)
    assert np.array(stats["entropy"]).shape == (2, 2)  # layers × heads
    shares = np.array(stats["cls"]) + np.array(stats["sep"])
    assert np.all(shares <= 1.0 + 1e-5) and np.all(np.array(stats["entropy"]) >= 0)
    assert summary["attention_heads"] and (tmp_path / "attention" / "probing" / "attention" / "entropy.png").is_file()

    # the geometry suite reads the evaluation split the sentence suite extracted: cache hits, nothing trained
    summary = run_probe(probe_cfg(tmp_path / "geometry", "probe=geometry", *small))
    ProbeSummary.model_validate(summary)
    tasks = {t["probe_task"]: t for t in summary["tasks"]}
    assert set(tasks) == {"anisotropy", "self_similarity", "intra_sentence_similarity"}
    assert all(d["cache_hit"] for d in summary["extraction"]["bert_tiny"]["datasets"].values())
    for name, t in tasks.items():
        assert t["family"] == "geometry" and "best_layer" not in t  # no layer is "best" at geometry
        assert [e["layer"] for e in t["layers"]] == [0, 1, 2] and t["random_init"]["layers"]
        for e in t["layers"]:
            assert -1.0 <= e["anisotropy"] <= 1.0
            if name != "anisotropy":
                assert e[f"{name}_adjusted"] == pytest.approx(e[name] - e["anisotropy"])
    assert tasks["self_similarity"]["word_types"] > 0


# -- bad input: one line, before any extraction ----------------------------------------------


def test_bad_input_is_refused_before_any_extraction(tmp_path, data_dir, home):
    from lightning_modules.stages.probe import build_probe

    xpos_missing = write(
        tmp_path,
        "noxpos.conllu",
        SAMPLE.replace("\tPRP\t", "\t_\t")
        .replace("\tVBP\t", "\t_\t")
        .replace("\tRB\t", "\t_\t")
        .replace("\tVB\t", "\t_\t")
        .replace("\t.\t_\t4\tpunct", "\t_\t_\t4\tpunct")
        .replace("\tNNS\t", "\t_\t")
        .replace("\tVBZ\t", "\t_\t"),
    )
    empty = write(tmp_path, "empty.conllu", "# nothing here\n")
    minilm = ["model=minilm"]
    cases = [
        (
            ["probe=xpos", f"probe.data.train={xpos_missing}", f"probe.data.eval={xpos_missing}"],
            f"{xpos_missing}: probe task 'xpos' needs the XPOS column",
        ),
        (["probe=upos", f"probe.data.train={empty}"], f"probe.data.train={empty}: no sentences"),
        (["probe=upos", "stage.layers=[2,9]"], "stage.layers: layer 9 is beyond the model"),
        (["probe=lama", f"probe.data.path={LAMA}", *minilm], "probe=lama needs a model with a masked-LM head"),
    ]
    before = FORWARD_PASSES["count"]
    for overrides, message in cases:
        with pytest.raises(PtmlabError, match=message.replace("[", r"\[").replace("]", r"\]")):
            build_probe(probe_cfg(tmp_path / "bad", *overrides))
    assert FORWARD_PASSES["count"] == before
    with pytest.raises(ConfigError, match="probe.tasks"):
        compose_config(["stage=probe", "probe=upos", "probe.tasks=[upos,colour]"])


def test_a_malformed_conllu_line_exits_2_through_ptmlab_run(tmp_path, data_dir, home):
    bad = write(tmp_path, "bad.conllu", SAMPLE.replace("3\tn't\tnot\tPART\tRB\t_\t4", "3\tn't\tnot\tPART\tRB\t_"))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ptmlab.run",
            "stage=probe",
            "probe=upos",
            "model=bert_tiny",
            f"probe.data.train={bad}",
            f"hydra.run.dir={tmp_path / 'run'}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PTMLAB_HOME": str(home)},
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert f"{bad}:6: expected 10 tab-separated fields, found 9" in lines[-1]
    assert not (home / "cache" / "activations").exists()


# -- ptmlab cache ------------------------------------------------------------------------------


def test_cache_command_lists_and_prunes(tmp_path, capsys):
    from transformers import BertTokenizerFast

    from lightning_modules.data.tokenizer import build_tokenizer
    from lightning_modules.models.transformer import TransformerEncoder
    from lightning_modules.probing.activations import extract
    from ptmlab.cli import main

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "a", "dog"]) + "\n")
    tokenizer = BertTokenizerFast(str(vocab))
    torch.manual_seed(0)
    backbone = TransformerEncoder(vocab_size=10, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32)
    cache = tmp_path / "cache"
    sentences = [["the", "cat", "sat"], ["a", "dog"], ["the", "dog", "sat"]]
    first = extract(
        backbone, tokenizer, sentences, cache_dir=cache, shard_sentences=2, model_label="tiny", data_label="toy"
    )
    other = extract(
        backbone, tokenizer, sentences[:2], cache_dir=cache, alignment="mean", model_label="tiny", data_label="toy2"
    )
    assert first.states.shape == (3, 8, 16) and first.forward_passes == 2  # two shards, one batch each
    again = extract(backbone, tokenizer, sentences, cache_dir=cache, shard_sentences=2)
    assert again.forward_passes == 0 and again.cache_hit and torch.equal(again.states, first.states)
    (cache / "activations" / other.key / "manifest.json").write_text(
        json.dumps({**json.loads((cache / "activations" / other.key / "manifest.json").read_text()), "last_used": 1.0})
    )

    with pytest.raises(SystemExit) as exit_info:
        main(["cache", "list", "--cache-dir", str(cache)])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert first.key in out and other.key in out and "2 entries" in out and "toy2" in out
    with pytest.raises(SystemExit):
        main(["cache", "prune", "--older-than", "1", "--cache-dir", str(cache)])
    assert f"removed {other.key}" in capsys.readouterr().out
    assert not (cache / "activations" / other.key).exists() and (cache / "activations" / first.key).exists()
    with pytest.raises(SystemExit):
        main(["cache", "prune", "--max-size", "1K", "--cache-dir", str(cache), "--dry-run"])
    assert f"would remove {first.key}" in capsys.readouterr().out
    assert (cache / "activations" / first.key).exists()


def tiny_encoder_and_sentences(tmp_path):
    """A 2-layer ptmlab encoder, a 12-piece WordPiece vocabulary, and sentences with split words."""
    from transformers import BertTokenizerFast

    from lightning_modules.models.transformer import TransformerEncoder

    vocab = tmp_path / "vocab.txt"
    vocab.write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "dog", "##s", "##ty", "run"])
        + "\n"
    )
    tokenizer = BertTokenizerFast(str(vocab))
    torch.manual_seed(0)
    backbone = TransformerEncoder(vocab_size=12, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32).eval()
    sentences = [["the", "cats", "sat"], ["dogs"], ["the", "catty", "dogs", "run", "runs"], ["sat", "the", "cat"]]
    return backbone, tokenizer, sentences


def test_side_work_runs_inline_where_torch_takes_every_core(tmp_path, monkeypatch):
    """Tokenising and writing shards go to threads only where torch leaves a core free; inline, the
    activations and shard files are the same bits, and a failed write still surfaces at its wait."""
    from concurrent.futures import ThreadPoolExecutor

    from lightning_modules.probing import activations

    backbone, tokenizer, sentences = tiny_encoder_and_sentences(tmp_path)
    monkeypatch.setattr(activations.torch, "get_num_threads", lambda: 1)
    with activations.side_executor("t") as executor:
        assert isinstance(executor, ThreadPoolExecutor) or len(os.sched_getaffinity(0)) == 1
    threaded = activations.extract(
        backbone, tokenizer, sentences, cache_dir=tmp_path / "a", batch_size=3, shard_sentences=3
    )
    monkeypatch.setattr(activations.torch, "get_num_threads", lambda: len(os.sched_getaffinity(0)))
    assert isinstance(activations.side_executor("t"), activations.InlineExecutor)
    inline = activations.extract(
        backbone, tokenizer, sentences, cache_dir=tmp_path / "b", batch_size=3, shard_sentences=3
    )
    assert inline.key == threaded.key and torch.equal(inline.states, threaded.states)
    for shard in sorted((tmp_path / "a" / "activations" / threaded.key).glob("shard_*")):
        assert shard.read_bytes() == (tmp_path / "b" / "activations" / inline.key / shard.name).read_bytes()
    failed = activations.InlineExecutor().submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failed.result()


@pytest.mark.parametrize("alignment", ["first", "last", "mean"])
def test_word_states_are_the_chosen_subwords_of_each_sentence_run_alone(tmp_path, alignment):
    """Extraction batches, pads and gathers; a word's state must still be its first, last or mean
    subword's state from a forward pass over its sentence alone, in sentence order, every layer."""
    from lightning_modules.probing.activations import extract

    backbone, tokenizer, sentences = tiny_encoder_and_sentences(tmp_path)
    acts = extract(
        backbone,
        tokenizer,
        sentences,
        cache_dir=tmp_path / "cache",
        alignment=alignment,
        batch_size=3,
        shard_sentences=3,
    )
    expected = []
    with torch.no_grad():
        for words in sentences:
            enc = tokenizer(words, is_split_into_words=True, return_tensors="pt")
            hidden = torch.stack(backbone(enc["input_ids"], attention_mask=enc["attention_mask"]).hidden_states)[:, 0]
            word_ids = enc.word_ids(0)
            for w in range(len(words)):
                pos = [p for p, i in enumerate(word_ids) if i == w]
                chosen = pos[:1] if alignment == "first" else pos[-1:] if alignment == "last" else pos
                expected.append(hidden[:, chosen].mean(1))  # (L+1) × H
    expected = torch.stack(expected, 1)  # (L+1) × words × H
    assert any(len(tokenizer.tokenize(w)) > 1 for s in sentences for w in s)  # words that split into subwords
    assert acts.states.shape == expected.shape and acts.lengths.tolist() == [3, 1, 5, 3]
    assert torch.allclose(acts.states.float(), expected.half().float(), atol=2e-3)
    again = extract(
        backbone,
        tokenizer,
        sentences,
        cache_dir=tmp_path / "cache",
        alignment=alignment,
        batch_size=3,
        shard_sentences=3,
    )
    assert again.cache_hit and torch.equal(again.states, acts.states)  # the shards on disk are what it returned


def test_prepared_inputs_tokenise_once_for_a_model_and_its_twin(tmp_path, monkeypatch):
    """A probe job extracts its model and the random-init twin from the same sentences: the second
    extraction reuses the first's tokenised shards, gives the states it would alone, and a cache
    hit prepares nothing."""
    from lightning_modules.models.transformer import TransformerEncoder
    from lightning_modules.probing import activations

    backbone, tokenizer, sentences = tiny_encoder_and_sentences(tmp_path)
    torch.manual_seed(1)
    twin = TransformerEncoder(vocab_size=12, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32).eval()
    prepared = []
    real_prepare = activations.prepare_shard
    monkeypatch.setattr(activations, "prepare_shard", lambda *a: prepared.append(a[1]) or real_prepare(*a))
    settings = dict(alignment="mean", batch_size=3, shard_sentences=3)
    inputs = activations.PreparedInputs(
        tokenizer, sentences, **settings, max_length=activations.tokenized_max_length(backbone)
    )
    activations.extract(backbone, tokenizer, sentences, cache_dir=tmp_path / "a", inputs=inputs, **settings)
    assert prepared == [sentences[:3], sentences[3:]]
    shared = activations.extract(twin, tokenizer, sentences, cache_dir=tmp_path / "a", inputs=inputs, **settings)
    assert len(prepared) == 2 and shared.forward_passes > 0  # the twin ran, on the shards already prepared
    alone = activations.extract(twin, tokenizer, sentences, cache_dir=tmp_path / "b", **settings)
    assert len(prepared) == 4 and torch.equal(alone.states, shared.states)
    hit = activations.extract(twin, tokenizer, sentences, cache_dir=tmp_path / "b", **settings)
    assert hit.cache_hit and len(prepared) == 4
    other_settings = activations.extract(
        twin,
        tokenizer,
        sentences,
        cache_dir=tmp_path / "c",
        inputs=inputs,
        alignment="first",
        batch_size=3,
        shard_sentences=3,
    )
    assert len(prepared) == 6 and other_settings.key != shared.key  # inputs of other settings are not reused
