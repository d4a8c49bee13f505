"""Generation metrics from the libraries that define them:

  bleu, chrf              sacreBLEU's corpus BLEU (13a tokenisation, exp smoothing) and chrF, over
                          every reference of an example (references may number differently per
                          example: sacreBLEU pads the missing streams); their signature strings go
                          in the summary (`METRIC_SIGNATURES` after a call)
  rouge1, rouge2, rougeL, rougeLsum
                          Google's rouge-score with the Porter stemmer on (the standard setting of
                          summarization papers), F-measure, x100; several references: the best
                          one per example (rouge-score's `score_multi`), then the mean
  length_ratio            output words ÷ first-reference words, over the split (BLEU's hyp/ref
                          length ratio, from sacreBLEU)

All are on a 0-100 scale except length_ratio.
"""

from __future__ import annotations

from collections.abc import Sequence

from ptmlab.contracts import ConfigError

BLEU_METRICS = ("bleu", "chrf", "length_ratio")
ROUGE_METRICS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
GENERATION_METRICS = (*BLEU_METRICS, *ROUGE_METRICS)
ROUGE_SETTING = "rouge-score F-measure, use_stemmer=True (Porter), best reference per example, mean x100"


def reference_streams(references: Sequence[Sequence[str]]) -> list[list[str]]:
    """Per-example reference lists -> sacreBLEU's streams (stream k holds every example's k-th
    reference; None where an example has fewer)."""
    width = max(len(r) for r in references)
    return [[refs[k] if k < len(refs) else None for refs in references] for k in range(width)]


def generation_metrics(
    names: Sequence[str], outputs: Sequence[str], references: Sequence[Sequence[str]]
) -> tuple[dict[str, float], dict[str, str]]:
    """({metric: value}, {metric: signature or setting}) for the requested metrics."""
    unknown = [n for n in names if n not in GENERATION_METRICS]
    if unknown:
        raise ConfigError(f"unknown generation metric '{unknown[0]}'; valid: {', '.join(GENERATION_METRICS)}")
    if len(outputs) != len(references):
        raise ValueError(f"{len(outputs)} outputs but {len(references)} reference lists")
    values, signatures = {}, {}
    if any(n in BLEU_METRICS for n in names):
        from sacrebleu.metrics import BLEU, CHRF

        streams = reference_streams(references)
        bleu = BLEU()
        score = bleu.corpus_score(list(outputs), streams)
        if "bleu" in names:
            values["bleu"], signatures["bleu"] = float(score.score), str(bleu.get_signature())
        if "length_ratio" in names:
            values["length_ratio"] = float(score.ratio)
        if "chrf" in names:
            chrf = CHRF()
            values["chrf"] = float(chrf.corpus_score(list(outputs), streams).score)
            signatures["chrf"] = str(chrf.get_signature())
    wanted = [n for n in ROUGE_METRICS if n in names]
    if wanted:
        from rouge_score import rouge_scorer

        scorer = rouge_scorer.RougeScorer(wanted, use_stemmer=True)
        totals = dict.fromkeys(wanted, 0.0)
        for output, refs in zip(outputs, references):
            scores = scorer.score_multi(list(refs), output)
            for n in wanted:
                totals[n] += scores[n].fmeasure
        for n in wanted:
            values[n] = 100.0 * totals[n] / max(len(outputs), 1)
            signatures[n] = ROUGE_SETTING
    return {n: values[n] for n in names}, signatures


def score_split(task, split: str, outputs: Sequence[str]) -> tuple[dict[str, float], dict[str, str]]:
    """A generation task's metrics on one labelled split of a LoadedTask (outputs in split order),
    keyed by `spec.metric_key` (bleu, bleu_test ...), and each metric's signature or setting."""
    data = task.data.splits[split]
    values, signatures = generation_metrics(task.spec.metrics, list(outputs), [ex.label for ex in data.examples])
    return (
        {task.spec.metric_key(k, split): v for k, v in values.items()},
        {task.spec.metric_key(k, split): v for k, v in signatures.items()},
    )
