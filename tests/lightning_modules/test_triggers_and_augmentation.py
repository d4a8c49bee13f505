"""Universal adversarial triggers (`attack=triggers`, lightning_modules/attacks/triggers.py) and
training on attack-augmented data (`defence=augment`, lightning_modules/attacks/augmentation.py).

By hand: a bag-of-embeddings classifier with a fixed 2-d embedding matrix (logits = the sum of
the tokens' embeddings, so ∂CE/∂e_t = p − y at every position) behind a real WordPiece tokenizer
and ptmlab's encoder: the gradient the victim returns, HotFlip's candidate ranking, the beam
search's choice, when the search stops, the queries it spent, and the attack on each example are
all worked out in the test. Through the stage: a tiny random model trained on a synthetic
sentiment task (positive iff most of its sentiment words are good or great) falls to the trigger
found on its positive dev sentences; the same seed gives the same trigger and records; bad
settings are one line before anything runs. Augmentation: a deepwordbug attack on the same model's
training split feeds a fine-tune, whose training split then holds each successful adversarial
example with its gold label (counted, and the steps trained over them), recorded as the defence
that an attack on the augmented model reports; a source that is no attack run, another task's
attack, or an attack on the dev split is one line before training. The job page: the records endpoint on
these real runs (deepwordbug's substitutions marked on both sides where the attack changed them,
the trigger only where it was inserted), every status paged, the summary's typed trigger fields and
its figures in the stage's terms; bad requests 422, a job without records 404."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from test_attack_stage import home, records
from torch import nn

from lightning_modules.artifacts.saved_task_model import LoadedTaskModel
from lightning_modules.attacks.recipe import FAILED, SUCCEEDED
from lightning_modules.attacks.triggers import UniversalTriggers, beam_search, hotflip_candidates
from lightning_modules.attacks.victim import Victim
from lightning_modules.tasks.encoding import PairEncoder
from ptmlab.contracts import ConfigError

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "good", "bad", "film", "great", "awful", "##s"]
# class 0 = negative, 1 = positive; specials embed to 0, so only the words count
EMBEDDING = {
    "the": (0.0, 0.0),
    "good": (0.0, 2.0),
    "bad": (2.5, 0.0),
    "film": (0.5, 0.5),
    "great": (0.0, 1.0),
    "awful": (1.5, 0.0),
}


class BagOfEmbeddings(nn.Module):
    """logits = Σ_t e(token_t): a classifier whose gradients are worked out by hand."""

    def __init__(self, tokenizer):
        super().__init__()
        weight = torch.zeros(len(VOCAB), 2)
        for word, vector in EMBEDDING.items():
            weight[VOCAB.index(word)] = torch.tensor(vector)
        self.backbone = SimpleNamespace(get_input_embeddings=lambda: self.embeddings)
        self.embeddings = nn.Embedding.from_pretrained(weight)

    def input_encoder(self, tokenizer, max_length, *, doc_stride=None):
        return PairEncoder(tokenizer, causal=False, max_length=max_length)

    def task_logits(self, task, batch):
        return (self.embeddings(batch["input_ids"]) * batch["attention_mask"].unsqueeze(-1)).sum(1)  # B×T×2 -> B×2


@pytest.fixture()
def victim(tmp_path) -> Victim:
    from transformers import BertTokenizer

    tokenizer = BertTokenizer(vocab={w: i for i, w in enumerate(VOCAB)})  # WordPiece over VOCAB
    loaded = LoadedTaskModel(
        BagOfEmbeddings(tokenizer), tokenizer, {"toy": SimpleNamespace(max_length=32, doc_stride=None)}, {}, tmp_path
    )
    return Victim(loaded, "toy")


def p_positive(*words: str) -> float:
    logits = torch.tensor([EMBEDDING[w] for w in words]).sum(0)
    return float(torch.softmax(logits, 0)[1])


def test_gradient_and_hotflip_ranking_by_hand(victim):
    recipe = UniversalTriggers(trigger_length=2, num_candidates=3)
    recipe.prepare(victim)
    ids = {w: VOCAB.index(w) for w in EMBEDDING}
    # every letters-only token that encodes back to itself: not the specials, not "##s"
    assert recipe._allowed.nonzero().flatten().tolist() == sorted(ids.values())
    assert recipe._trigger == (ids["the"], ids["the"])
    sentences = [["good", "film"], ["great", "film"]]
    # "the the good film" -> [CLS] the the good film [SEP]: the trigger's slots are tokens 1 and 2
    assert recipe.slots(victim, sentences, recipe._trigger) == [[1, 2], [1, 2]]
    # ∂CE(positive)/∂e = p − y = (1 − p₁, p₁ − 1) at every token; the trigger ("the" = 0) changes nothing
    g = [
        torch.tensor([1 - p_positive("good", "film"), p_positive("good", "film") - 1]),
        torch.tensor([1 - p_positive("great", "film"), p_positive("great", "film") - 1]),
    ]
    grads = victim.embedding_gradients([recipe.with_trigger(s, recipe._trigger) for s in sentences], [1, 1])
    assert [tuple(x.shape) for x in grads] == [(6, 2), (6, 2)] and victim.queries == 2
    assert torch.allclose(grads[0], g[0].expand(6, 2), atol=1e-6)
    mean = (g[0] + g[1]) / 2
    assert torch.allclose(recipe.average_gradient(victim, sentences, [1, 1]), mean.expand(2, 2), atol=1e-6)
    # e_v · g with g = (a, −a), a > 0: bad 2.5a, awful 1.5a, film and the 0 (tie: the lower id), good −2a, great −a
    candidates = hotflip_candidates(mean.expand(2, 2), victim.embedding_matrix(), recipe._allowed, 3)
    assert candidates.tolist() == [[ids["bad"], ids["awful"], ids["the"]]] * 2
    # pairs: the trigger goes in front of each example's own second text, [CLS] a [SEP] t t b [SEP]
    pairs = [("great", "good film"), ("bad film", "good film")]
    assert recipe.slots(victim, sentences[:1] * 2, recipe._trigger, pairs) == [[3, 4], [4, 5]]
    losses, predicted = victim.gold_losses([recipe.with_trigger(["good", "film"], recipe._trigger)] * 2, [1, 1], pairs)
    assert torch.allclose(
        losses,
        torch.tensor(
            [-math.log(p_positive("great", "good", "film")), -math.log(p_positive("bad", "film", "good", "film"))]
        ),
        atol=1e-6,
    )


def test_beam_search_by_hand():
    loss = {(0, 0): 1.0, (1, 0): 3.0, (2, 0): 2.0, (1, 3): 2.5, (1, 4): 4.0, (2, 3): 5.0, (2, 4): 0.5}
    seen = []

    def score(trigger):
        seen.append(trigger)
        return loss[trigger]

    # beam 1: position 0 keeps (1, 0) (3.0); position 1: (1, 4) (4.0) — (2, 3)'s 5.0 is never seen
    assert beam_search((0, 0), [[1, 2], [3, 4]], score, 1) == ((1, 4), 4.0)
    assert (2, 3) not in seen
    # beam 2 keeps (1, 0) and (2, 0), and finds (2, 3)
    assert beam_search((0, 0), [[1, 2], [3, 4]], lambda t: loss[t], 2) == ((2, 3), 5.0)
    # no candidate raises the loss: the unchanged trigger (scored first) wins
    assert beam_search((1, 4), [[1], [4]], lambda t: loss[t], 1) == ((1, 4), 4.0)


def test_search_and_attack_by_hand(victim):
    """One slot, 2 candidates: iteration 1 ranks bad, awful (as above) and keeps bad, the higher
    loss; iteration 2's candidates are the same, awful scores below bad: no candidate improves,
    the search stops. Queries: the start (2 sentences); iteration 1: the gradient (2), bad (2),
    awful (2); iteration 2: the gradient (2) only (bad is the trigger, awful was scored before)."""
    recipe = UniversalTriggers(trigger_length=1, num_candidates=2)
    recipe.prepare(victim)
    examples = [(("good film",), 1), (("great film",), 1)]
    recipe.search(victim, examples)
    report = recipe.report()
    assert report["trigger"] == "bad" and report["trigger_tokens"] == [VOCAB.index("bad")]
    search = report["trigger_search"]
    assert search["iterations"] == 1 and search["queries"] == 2 + (2 + 2 + 2) + 2
    ce = [-math.log(p_positive(*w)) for w in (["the", "good", "film"], ["the", "great", "film"])]
    ce_bad = [-math.log(p_positive(*w)) for w in (["bad", "good", "film"], ["bad", "great", "film"])]
    assert search["history"][0]["loss"] == pytest.approx(sum(ce) / 2, abs=1e-5)
    assert search["history"][1] == {
        "iteration": 1,
        "trigger": "bad",
        "loss": pytest.approx(sum(ce_bad) / 2, abs=1e-5),
        "accuracy": 0.0,
    }  # bad good film: (3, 2.5) -> negative
    probs = victim.probabilities([["good", "film"]], count=False)[0]
    words, changed, after, status = recipe.attack(victim, ("good film",), 1, probs, random.Random(0))
    assert (words, changed, status, victim.queries) == (["bad", "good", "film"], [0], SUCCEEDED, 2)
    assert float(after[1]) == pytest.approx(p_positive("bad", "good", "film"), abs=1e-6)
    appended = UniversalTriggers(trigger_length=1, position="append")
    appended.prepare(victim)
    appended._trigger = (VOCAB.index("awful"),)
    assert appended.slots(victim, [["good", "film"]], appended._trigger) == [[3]]
    words, changed, after, status = appended.attack(victim, ("good film",), 1, probs, random.Random(0))
    assert (words, changed, status) == (["good", "film", "awful"], [2], FAILED)  # (2, 2.5): still positive


def test_bad_settings_refused_in_one_line(victim):
    # built in code, validated by the declaration: the line compose time gives
    with pytest.raises(ConfigError, match="^attack.trigger_length=0: expected a positive integer$"):
        UniversalTriggers(trigger_length=0)
    with pytest.raises(ConfigError, match="^attack.position='middle': expected one of 'prepend', 'append'$"):
        UniversalTriggers(position="middle")
    with pytest.raises(ConfigError, match="attack.init_token=films: not a whole-word token"):
        UniversalTriggers(init_token="films").prepare(victim)
    victim.loaded.manifest["compression"] = [{"op": "quantize", "backend": "torch.ao", "embeddings": True}]
    with pytest.raises(ConfigError, match="the source is an int8 model, whose quantized layers give no gradients"):
        UniversalTriggers().prepare(victim)


# -- through the stage, on a tiny model ------------------------------------------------------

NEUTRAL = "the a film movie was is it very and of to story plot".split()
SENTIMENT = {"good": "1", "great": "1", "bad": "0", "awful": "0"}
TINY = [
    "model=bert_tiny",
    "model.backbone.num_layers=2",
    "model.backbone.num_heads=2",
    "model.backbone.hidden_size=32",
    "model.backbone.intermediate_size=64",
    "tokenizer.vocab_size=100",
    "tokenizer.min_frequency=1",
    "trainer.enable_progress_bar=false",
    "checkpoint_every_n_steps=0",
    "seed=3",
]


def sentiment_rows(n: int, rng: random.Random) -> list[tuple[str, str]]:
    """Five words, one or three of them sentiment words; positive iff most of those are good or
    great (so a negative word added can outvote a positive one)."""
    rows = []
    for _ in range(n):
        marked = [rng.choice(sorted(SENTIMENT)) for _ in range(rng.choice((1, 3)))]
        words = marked + [rng.choice(NEUTRAL) for _ in range(5 - len(marked))]
        rng.shuffle(words)
        positive = sum(SENTIMENT[w] == "1" for w in marked) * 2 > len(marked)
        rows.append((" ".join(words), "1" if positive else "0"))
    return rows


@pytest.fixture(scope="module")
def sentiment(tmp_path_factory) -> dict:
    """The synthetic task's files (train 240, dev 60) and its tokenizer corpus."""
    folder = tmp_path_factory.mktemp("sentiment")
    rng = random.Random(0)
    for split, n in (("train", 240), ("dev", 60)):
        rows = sentiment_rows(n, rng)
        (folder / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    (folder / "corpus").mkdir()
    (folder / "corpus" / "doc.txt").write_text((folder / "train.tsv").read_text().replace("\t", " "))
    return {
        "folder": folder,
        "task": [
            "task=tabular",
            f"task.data.train={folder / 'train.tsv'}",
            f"task.data.dev={folder / 'dev.tsv'}",
            "task.data.text_fields=[sentence]",
            "task.name=sentiment",
            "task.max_length=32",
        ],
    }


def finetune_sentiment(run_dir: Path, sentiment: dict, *extra: str) -> dict:
    from lightning_modules.stages.finetune import run_finetune
    from ptmlab.config import compose_config

    return run_finetune(
        compose_config(
            [
                "stage=finetune",
                *TINY,
                "data=text_files",
                f"data.corpus.path={sentiment['folder'] / 'corpus'}",
                *sentiment["task"],
                "stage.epochs=6",
                "stage.batch_size=16",
                "stage.lr=3e-3",
                "stage.pooling=mean",
                f"+run_dir={run_dir}",
                *extra,
            ]
        )
    )


@pytest.fixture(scope="module")
def sentiment_model(home, sentiment, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("sentiment_model") / "run"
    summary = finetune_sentiment(run_dir, sentiment)
    assert summary["main_score"] >= 0.9, summary["metrics"]  # it learned the rule the trigger must break
    return run_dir


def attack(run_dir: Path, *overrides: str) -> dict:
    from lightning_modules.stages.attack import run_attack
    from ptmlab.config import compose_config

    return run_attack(compose_config(["stage=attack", *overrides, f"+run_dir={run_dir}"]))


TRIGGER_ARGS = [
    "attack=triggers",
    "attack.num_examples=20",
    "attack.label=1",
    "attack.num_candidates=10",
    "attack.iterations=3",
    "seed=5",
]


@pytest.fixture(scope="module")
def trigger_attack(sentiment_model, tmp_path_factory) -> tuple[Path, dict]:
    """The trigger searched on 20 positive dev sentences: (its run folder, summary)."""
    run_dir = tmp_path_factory.mktemp("trigger_attack") / "run"
    return run_dir, attack(run_dir, *TRIGGER_ARGS, f"source={sentiment_model}")


def test_a_trigger_found_on_positive_sentences_breaks_them_and_is_deterministic(
    sentiment_model, trigger_attack, tmp_path
):
    first, second = trigger_attack[1], attack(tmp_path / "b", *TRIGGER_ARGS, f"source={sentiment_model}")
    assert records(first) == records(second) and first["trigger"] == second["trigger"]
    assert first["label"] == "1" and first["constraints"]["trigger_length"] == 3
    assert first["clean_accuracy"] - first["accuracy_under_attack"] >= 0.5, (
        first["trigger_search"],
        first["constraints"],
    )
    trigger = first["trigger"].split()
    assert len(trigger) == 3 and first["trigger_search"]["iterations"] >= 1
    assert set(trigger) & {"bad", "awful"}, first["trigger_search"]  # the negative words, found by the gradient
    for r in records(first):
        assert r["label"] == 1
        if r["status"] != "skipped":
            assert r["perturbed"].split() == trigger + r["original"].split() and r["changed_indices"] == [0, 1, 2]
            assert r["queries"] == 2 and r["inserted"] == 3
    assert first["perturbed_word_ratio"] == pytest.approx(3 / (3 + 5))  # the trigger's share of each 8-word text


def test_bad_input_is_one_line_before_the_attack(home, sentiment_model, tmp_path, monkeypatch):
    """In process, where ptmlab.run meets them (stage_preflight.py; exit 2 through the entry point is
    the attack stage's one run, test_attack_stage.py)."""
    from stage_preflight import error_line_before_work

    from lightning_modules.stages.attack import build_attack

    for extra, message in (
        ("attack.trigger_length=0", "attack.trigger_length=0"),
        ("attack.label=2", "attack.label=2: not a label of task sentiment"),
    ):
        line = error_line_before_work(
            ["stage=attack", "attack=triggers", f"source={sentiment_model}", extra, f"+run_dir={tmp_path / 'run'}"],
            monkeypatch,
            build=build_attack,
        )
        assert line.startswith("error[config_error]") and message in line, line
    assert not (tmp_path / "run" / "summary.json").exists()


# -- training on attack-augmented data -------------------------------------------------------


@pytest.fixture(scope="module")
def train_attack(sentiment_model, tmp_path_factory) -> tuple[Path, dict]:
    """deepwordbug on 40 rows of the sentiment model's training split: (its run folder, summary)."""
    run_dir = tmp_path_factory.mktemp("train_attack") / "run"
    return run_dir, attack(
        run_dir,
        "attack=deepwordbug",
        f"source={sentiment_model}",
        "attack.split=train",
        "attack.num_examples=40",
        "seed=1",
    )


def augmented(sentiment: dict, source: Path, *extra: str, task: list[str] | None = None) -> list[str]:
    """A fine-tune's overrides: 48 training rows of the task, one epoch, plus the attack's examples."""
    return [
        "stage=finetune",
        *TINY,
        "data=text_files",
        f"data.corpus.path={sentiment['folder'] / 'corpus'}",
        *(sentiment["task"] if task is None else task),
        "task.max_train_samples=48",
        "stage.epochs=1",
        "stage.batch_size=16",
        "defence=augment",
        f"defence.source={source}",
        *extra,
    ]


def compose(overrides: list[str], run_dir: Path):
    from ptmlab.config import compose_config

    return compose_config([*overrides, f"+run_dir={run_dir}"])


def test_a_fine_tune_trains_on_the_attacks_adversarial_examples(sentiment, train_attack, tmp_path):
    from lightning_modules.stages.finetune import build_finetune, run_finetune

    source, summary = train_attack
    adversarial = [r for r in records(summary) if r["status"] == "succeeded"]
    assert summary["split"] == "train" and len(adversarial) == summary["counts"]["succeeded"] >= 5
    parts = build_finetune(compose(augmented(sentiment, source), tmp_path / "built"))
    train = parts.task.train.examples
    assert len(train) == 48 + len(adversarial)
    assert [(ex.texts, ex.label) for ex in train[48:]] == [((r["perturbed"],), r["label"]) for r in adversarial]
    # the data module's training batches are drawn from all of them
    assert len(parts.datamodule.encoded(parts.task.data.train_split)) == len(train)
    finetuned = run_finetune(compose(augmented(sentiment, source), tmp_path / "run"))
    assert finetuned["steps"] == math.ceil(len(train) / 16)
    assert finetuned["defence"] == {
        "name": "augment",
        "source": str(source),
        "recipe": "deepwordbug",
        "attack_split": "train",
        "include_failed": False,
        "max_examples": None,
        "added": len(adversarial),
    }
    measured = attack(tmp_path / "attack", "attack=deepwordbug", f"source={tmp_path / 'run'}", "attack.num_examples=4")
    assert measured["source_defence"]["name"] == "augment" and measured["source_defence"]["added"] == len(adversarial)
    capped = build_finetune(compose(augmented(sentiment, source, "defence.max_examples=2"), tmp_path / "capped"))
    assert len(capped.task.train.examples) == 48 + 2 and capped.augmentation.settings()["added"] == 2


def test_augment_bad_source_is_one_line_before_training(
    home, sentiment, sentiment_model, train_attack, tmp_path, monkeypatch
):
    """In process, where ptmlab.run meets them (stage_preflight.py; exit 2 through the entry point is
    the finetune stage's one run)."""
    import shutil

    from stage_preflight import error_line_before_work

    from lightning_modules.stages.finetune import build_finetune

    line = error_line_before_work(
        [*augmented(sentiment, sentiment_model), f"+run_dir={tmp_path / 'not_an_attack'}"],
        monkeypatch,
        build=build_finetune,
    )
    assert line.startswith("error[config_error]") and "not a stage=attack run folder" in line, line
    assert not (tmp_path / "not_an_attack" / "summary.json").exists()
    source, summary = train_attack
    with pytest.raises(ConfigError, match="an attack on task sentiment; this fine-tune's task is sst2"):
        build_finetune(compose(augmented(sentiment, source, task=["task=glue/sst2"]), tmp_path / "sst2"))
    on_dev = tmp_path / "attack_on_dev"
    shutil.copytree(source, on_dev)
    (on_dev / "summary.json").write_text(
        json.dumps({**json.loads((source / "summary.json").read_text()), "split": "dev"})
    )
    with pytest.raises(ConfigError, match="the attack ran on split 'dev', which this fine-tune evaluates on"):
        build_finetune(compose(augmented(sentiment, on_dev), tmp_path / "dev"))


# -- the job page: the summary's figures and the records, changed words marked -----------------


def attack_job(db_url: str, summary_file: Path, run_dir: Path | None = None) -> int:
    """A succeeded attack job whose result row is what the worker stores for `summary_file` (the
    contract's dump); `run_dir` moves where the row says the run is."""
    from ptmlab.contracts import validate_summary
    from ptmlab.db import session_scope
    from ptmlab.db.models import SUCCEEDED
    from ptmlab.queue import submit_job
    from ptmlab.results import new_result

    row = validate_summary(json.loads(summary_file.read_text())).model_dump()
    if run_dir is not None:
        row["run_dir"] = str(run_dir)
    with session_scope(db_url) as s:
        job = submit_job(s, stage="attack", overrides=[f"attack={row['recipe']}"], queue="seeded")
        job.status, job.run_dir = SUCCEEDED, row["run_dir"]
        s.add(new_result(row, job_id=job.id))
        s.commit()
        return job.id


def marked(words: list[dict] | None) -> list[int]:
    return [i for i, w in enumerate(words or []) if w["changed"]]


def test_the_job_page_serves_the_records_with_the_changed_words_marked(
    train_attack, trigger_attack, tmp_path, monkeypatch
):
    from fastapi.testclient import TestClient

    from ptmlab.api.app import create_app
    from ptmlab.contracts import AttackSummary, validate_summary
    from ptmlab.contracts.summaries import TriggerSearch
    from ptmlab.db import dispose_engines, migrate, session_scope
    from ptmlab.queue import submit_job
    from ptmlab.settings import Settings

    (dwb_dir, dwb), (trigger_dir, triggers) = train_attack, trigger_attack
    typed = validate_summary(json.loads((trigger_dir / "summary.json").read_text()))
    assert isinstance(typed, AttackSummary) and isinstance(typed.trigger_search, TriggerSearch)
    assert typed.trigger == triggers["trigger"] and all(isinstance(t, int) for t in typed.trigger_tokens)
    assert typed.label == "1" and typed.class_labels == ["0", "1"] and typed.attacked_text == "only"
    url = f"sqlite:///{tmp_path / 'ptmlab.db'}"
    migrate(url)
    ids = {
        "dwb": attack_job(url, dwb_dir / "summary.json"),
        "triggers": attack_job(url, trigger_dir / "summary.json"),
        "moved": attack_job(url, dwb_dir / "summary.json", run_dir=tmp_path / "elsewhere"),
    }
    monkeypatch.setenv("PTMLAB_HOME", str(tmp_path / "home"))
    client = TestClient(create_app(Settings(home=tmp_path / "home", database_url=url)))
    try:
        every = records(dwb)
        for status in ("succeeded", "failed", "skipped"):
            of_status = [r for r in every if r["status"] == status]
            first = client.get(f"/api/v1/jobs/{ids['dwb']}/attack-records?status={status}&limit=3").json()
            rest = client.get(f"/api/v1/jobs/{ids['dwb']}/attack-records?status={status}&limit=200&offset=3").json()
            assert first["counts"] == dwb["counts"] and first["total"] == len(of_status) == dwb["counts"][status]
            shown = first["records"] + rest["records"]
            assert [r["index"] for r in shown] == [r["index"] for r in of_status] and len(first["records"]) <= 3
            for got, record in zip(shown, of_status):
                assert " ".join(w["word"] for w in got["original"]) == record["original"]
                if status == "skipped":
                    assert got["perturbed"] is None and not marked(got["original"])
                    continue
                # deepwordbug substitutes in place: the diff marks what the attack changed, on both sides
                assert " ".join(w["word"] for w in got["perturbed"]) == record["perturbed"]
                assert marked(got["perturbed"]) == marked(got["original"]) == record["changed_indices"]

        page = client.get(f"/api/v1/jobs/{ids['triggers']}/attack-records").json()  # succeeded, 20 at most
        assert page["trigger"] == triggers["trigger"] and page["records"]
        for got in page["records"]:  # an inserted trigger: marked where it stands, nothing marked in the original
            assert marked(got["perturbed"]) == [0, 1, 2] and not marked(got["original"])
            assert [w["word"] for w in got["perturbed"][:3]] == triggers["trigger"].split()

        written = json.loads((trigger_dir / "summary.json").read_text())
        rows = {
            r["name"]: r
            for r in client.get(f"/api/v1/views/jobs/{ids['triggers']}").json()["results"][0]["digest"]["rows"]
        }
        for name, key in (
            ("clean accuracy", "clean_accuracy"),
            ("accuracy under attack", "accuracy_under_attack"),
            ("success rate", "success_rate"),
            ("perturbed word ratio", "perturbed_word_ratio"),
            ("queries", "queries"),
            ("seconds per example", "seconds_per_example"),
            ("sample size", "num_examples"),
            ("recipe", "recipe"),
            ("trigger", "trigger"),
            ("seed", "seed"),
        ):
            assert rows[name]["value"] == written[key], name
        assert rows["sample size"]["note"] == "dev split, gold class 1"

        moved = client.get(f"/api/v1/jobs/{ids['moved']}/attack-records")
        assert moved.status_code == 404 and "elsewhere/attack/records.jsonl" in moved.json()["error"]["message"]
        assert client.get("/api/v1/jobs/999/attack-records").status_code == 404
        with session_scope(url) as s:
            sleep = submit_job(s, stage="sleep", overrides=[], queue="seeded").id
        refused = client.get(f"/api/v1/jobs/{sleep}/attack-records")
        assert refused.status_code == 404 and f"job {sleep} has no attack result" in refused.json()["error"]["message"]
        for bad in ("status=nosuch", "limit=0", "limit=201", "offset=-1"):
            assert client.get(f"/api/v1/jobs/{ids['dwb']}/attack-records?{bad}").status_code == 422, bad
    finally:
        dispose_engines()
