"""What a fine-tune stores of its mistakes (lightning_modules/tasks/confusion.py), built from
predictions and labels without training: the classification report, the entity-level confusion
of a BIO tag set, the word-level one of any other tag set, and the majority-class baseline."""

from __future__ import annotations

import pytest
import torch

from lightning_modules.tasks.confusion import (
    MISCLASSIFIED_SHOWN,
    confusion_report,
    entity_confusion,
    majority_baseline,
    tag_confusion,
)


def test_classification_report_rows_gold_columns_predicted_most_confident_mistakes_first():
    # gold 0 0 1 1 2; predicted 0 1 1 0 2 (example 1 wrong at p=0.9, example 3 wrong at p=0.6)
    logits = torch.log(
        torch.tensor([[0.8, 0.1, 0.1], [0.05, 0.9, 0.05], [0.1, 0.8, 0.1], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]])
    )
    report = confusion_report(logits, [0, 0, 1, 1, 2], ["neg", "neu", "pos"], [["a"], ["b"], ["c"], ["d", "e"], ["f"]])
    assert report["labels"] == ["neg", "neu", "pos"]
    assert report["matrix"] == [[1, 1, 0], [1, 1, 0], [0, 0, 1]]
    assert report["errors"] == 2 and report["examples"] == 5
    assert [(m["index"], m["gold"], m["predicted"]) for m in report["misclassified"]] == [
        (1, "neg", "neu"),
        (3, "neu", "neg"),
    ]
    assert report["misclassified"][0]["score"] == pytest.approx(0.9, abs=1e-4)
    assert report["misclassified"][1]["text"] == "d ||| e"
    neg = report["per_class"][0]
    assert (neg["precision"], neg["recall"], neg["support"]) == (0.5, 0.5, 2)
    assert report["per_class"][2]["f1"] == 1.0


def test_misclassified_examples_are_capped():
    logits = torch.tensor([[0.0, 1.0]] * 30)
    report = confusion_report(logits, [0] * 30, ["a", "b"], [["x"]] * 30)
    assert report["errors"] == 30 and len(report["misclassified"]) == MISCLASSIFIED_SHOWN


def test_entity_confusion_counts_type_swaps_missed_and_spurious_as_seqeval_scores_them():
    words = [["John", "lives", "in", "Paris", "now"], ["Acme", "hired", "Mary"]]
    gold = [["B-PER", "O", "O", "B-LOC", "O"], ["B-ORG", "O", "B-PER"]]
    # PER right; LOC predicted as ORG; ORG missed; PER right; a spurious LOC on "now"
    pred = [["B-PER", "O", "O", "B-ORG", "B-LOC"], ["O", "O", "B-PER"]]
    report = entity_confusion(gold, pred, words)
    assert report["level"] == "entity" and report["labels"] == ["LOC", "ORG", "PER", "O"]
    assert report["matrix"] == [
        [0, 1, 0, 0],  # gold LOC: predicted ORG
        [0, 0, 0, 1],  # gold ORG: missed
        [0, 0, 2, 0],  # gold PER: both right
        [1, 0, 0, 0],
    ]  # no gold entity: a spurious LOC
    assert report["missed"] == {"LOC": 0, "ORG": 1, "PER": 0} and report["spurious"] == {"LOC": 1, "ORG": 0, "PER": 0}
    assert report["errors"] == 3 and report["examples"] == 4
    shown = {(m["entity"], m["gold"], m["predicted"]) for m in report["misclassified"]}
    assert shown == {("Paris", "LOC", "ORG"), ("Acme", "ORG", "O"), ("now", "O", "LOC")}
    per = {row["label"]: row for row in report["per_class"]}
    assert per["PER"]["f1"] == 1.0 and per["ORG"]["recall"] == 0.0 and per["LOC"]["support"] == 1
    assert tag_confusion(["O", "B-PER", "I-PER", "B-LOC", "B-ORG"], gold, pred, words) == report


def test_a_tag_set_that_is_not_bio_is_confused_word_by_word():
    words = [["the", "cat", "runs"]]
    report = tag_confusion(["DET", "NOUN", "VERB"], [["DET", "NOUN", "VERB"]], [["DET", "VERB", "VERB"]], words)
    assert report["level"] == "word" and report["matrix"] == [[1, 0, 0], [0, 0, 1], [0, 0, 1]]
    assert report["misclassified"] == [
        {"index": 0, "text": "the cat runs", "word": "cat", "gold": "NOUN", "predicted": "VERB", "score": None}
    ]


def test_the_baseline_predicts_the_training_sets_majority_class_on_the_eval_split():
    # training: class 1 most frequent; eval: class 0 most frequent -> accuracy of always 1 = 1/4
    values = majority_baseline(["accuracy", "macro_f1"], [1, 1, 1, 0], [0, 0, 0, 1], num_labels=2)
    assert values["accuracy"] == pytest.approx(0.25)
    assert values["macro_f1"] == pytest.approx(0.5 * (2 * 0.25 / 1.25))  # class 1: p 1/4, r 1; class 0: 0
    assert majority_baseline(["pearson"], [0.5], [0.7], num_labels=1) == {}
