"""The fine-tune that an ASHA study is compared with a 16-point grid on (issue 26's Done-when):
tests/platform/test_studies.py and bench/study.py run the same design.

A generated polarity task, written as TSV for `task=tabular` (and a corpus of its words, so the
tokenizer trained for a random-init bert_tiny has most words as one token): each sentence holds
three of 40 polar words among 9 neutral ones, its label is the majority polarity. A model learns it
only by learning each polar word's sign, so the dev accuracy rises over the epochs (each epoch
shows every polar word about 77 times) and how fast depends on the learning rate: a good one
reaches the high 90s, one a decade or two too low stays in the 60s-80s. The first validation
then ranks trials by what they will reach, which is what ASHA judges on; on a pre-trained task
near chance (the demo sentiment with 128 examples) those ranks were noise.

The sampler is random search (ASHA's own setting): at the same epoch the small batch sizes have
taken the most steps, so ASHA's first rung favours them, and TPE, fed those ranks, kept asking
for batch size 8, the trials that cost the most steps (a TPE run spent 61 % of the grid's steps).
"""

from __future__ import annotations

import random
from pathlib import Path

OBJECTIVE = "val/tabular/accuracy"
EPOCHS = 8  # validations per trial; ASHA (reduction factor 4) judges at the 1st and 4th
TRAIN, DEV = 1024, 1000
# WordPiece on this corpus stops between 686 and 715 pieces, by its tie-breaking (1,000 trainings): a
# request of 700 failed one trial in a suite run. 660 is below all 1,000 of them and keeps 180-200 of the
# 240 words whole (225-232 at 700).
VOCAB_SIZE = 660


def fixed_overrides(folder: Path) -> list[str]:
    return [
        "task=tabular",
        f"task.data.train={folder}/train.tsv",
        f"task.data.dev={folder}/dev.tsv",
        "task.max_length=24",
        "data=text_files",
        f"data.corpus.path={folder}/corpus",
        f"tokenizer.vocab_size={VOCAB_SIZE}",
        f"stage.epochs={EPOCHS}",
        "stage.pooling=mean",
        "stage.write_predictions=false",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
        # the study's experiment as its thresholds were measured (conf/stage/finetune.yaml's values);
        # which recipe a study starts from is not what these tests are about
        "recipe=none",
    ]


# The same space twice: searched (log learning rate) and as the 4 x 4 grid over its ends.
SPACE = ["stage.lr=tag(log,interval(3e-5,3e-3))", "stage.batch_size=choice(8,16,32,64)"]
GRID = ["stage.lr=choice(3e-5,1.4e-4,6.5e-4,3e-3)", "stage.batch_size=choice(8,16,32,64)"]
ASHA = {"sampler": "random", "pruner": "asha", "reduction_factor": 4, "min_resource": 1}


def steps_per_trial(batch_size: int) -> int:
    return EPOCHS * -(-TRAIN // batch_size)


def _words(n: int, rng: random.Random) -> list[str]:
    """n distinct made-up words of three consonant-vowel syllables."""
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice("bdfgklmnprstvz") + rng.choice("aeiou") for _ in range(3)))
    return sorted(words)


def write_polarity_task(
    folder: Path, seed: int = 0, polar: int = 20, neutral: int = 200, length: int = 12, polar_per_sentence: int = 3
) -> Path:
    """train.tsv, dev.tsv (label, text) and corpus/words.txt under `folder`; returns `folder`."""
    rng = random.Random(seed)
    vocab = _words(2 * polar + neutral, rng)
    rng.shuffle(vocab)
    positive, negative, filler = vocab[:polar], vocab[polar : 2 * polar], vocab[2 * polar :]

    def sentence() -> str:
        k = rng.randrange(polar_per_sentence + 1)  # how many of its polar words are positive
        words = rng.sample(positive, k) + rng.sample(negative, polar_per_sentence - k)
        words += rng.sample(filler, length - polar_per_sentence)
        rng.shuffle(words)
        return f"{int(2 * k > polar_per_sentence)}\t{' '.join(words)}\n"

    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", TRAIN), ("dev", DEV)):
        (folder / f"{split}.tsv").write_text("label\ttext\n" + "".join(sentence() for _ in range(n)), encoding="utf-8")
    (folder / "corpus").mkdir(exist_ok=True)
    # Each word three times: the tokenizer (min_frequency 2) keeps every word whole.
    (folder / "corpus" / "words.txt").write_text(" ".join(vocab * 3) + "\n", encoding="utf-8")
    return folder
