"""A fine-tune job's predictions for its job page: a page of one split's examples from the run's
`predictions/` folder, as the finetune stage wrote them, in the terms of the task's kind:

  generation             `<split>.jsonl`: source, references, output (tasks/generation_predictions.py)
  span_extraction        `<split>.<task>.jsonl`: the predicted answer beside the gold ones
                         (tasks/span_answers.py); `matches_gold`: the answer is one of them verbatim
                         (the official EM normalises first: the summary's exact_match is that one)
  multiple_choice        `<split>.<task>.jsonl`: the chosen index, each choice's score, the gold index
  token_classification   `<split>.<task>.tsv`: the input's columns and the predicted tag, a blank line
                         between sentences (tasks/tagged_predictions.py); each word with its gold and
                         predicted tag, a disagreement marked `error`
  classification         `<split>.tsv`: index, predicted label, gold label (tasks/predictions.py);
                         `correct`: they agree

Every answer carries `confusion`: the run's confusion report (CONFUSION_FILE: classification's
matrix, per-class scores and most confident mistakes; token classification's entity-level or
word-level confusion), null where the run wrote none.

`errors_only` keeps the examples the model got wrong (a tagged sentence with any word wrong, an
answer not among the gold ones, a wrong choice or class; generation has no such notion and keeps all).
Files are read line by line, so a large split costs one pass and a page of memory. Texts are data,
never HTML: the page puts them in text nodes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from ptmlab.contracts.benchmarks import summary_task_kind
from ptmlab.contracts.summaries import CONFUSION_FILE
from ptmlab.errors import DataError, NotFoundError
from ptmlab.views.compare import resolved_config
from ptmlab.views.job_result import job_result

SAMPLED_KINDS = ("generation", "span_extraction", "multiple_choice", "token_classification", "classification")
PREDICTIONS_DIR = "predictions"
# CoNLL-U's label columns (task.data.label_column of task=upos) -> their index in a word line
CONLLU_LABEL_INDEX = {"upos": 3, "xpos": 4, "deprel": 7}
CONLLU_FORM_INDEX = 1


def _file_name(kind: str, split: str, task: str) -> str:
    if kind == "generation":
        return f"{split}.jsonl"
    if kind == "classification":
        return f"{split}.tsv"
    return f"{split}.{task}.{'tsv' if kind == 'token_classification' else 'jsonl'}"


def prediction_splits(folder: Path, kind: str, task: str) -> list[str]:
    """The splits the folder has a predictions file of, evaluation splits (dev ...) first."""
    names = sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
    suffix = _file_name(kind, "", task)  # ".jsonl", ".<task>.jsonl", ".<task>.tsv"
    splits = [n[: -len(suffix)] for n in names if n.endswith(suffix) and "." not in n[: -len(suffix)]]
    return sorted((s for s in splits if s), key=lambda s: (not s.startswith(("dev", "val")), s))


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict):
                raise DataError(f"{path}, line {number}: not a prediction record (a JSON object)")
            yield record


def _generation(record: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    return {
        "id": record.get("id"),
        "source": record.get("source"),
        "references": record.get("references"),
        "output": record.get("output"),
    }, False


def _span(record: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    gold = [str(g) for g in record.get("gold") or []]
    prediction = str(record.get("prediction") or "")
    # v2.0: an unanswerable question has no gold answer, and "" is then the right answer
    matches = prediction in gold if gold else prediction == ""
    return {
        "id": record.get("id"),
        "prediction": prediction,
        "gold": gold,
        "matches_gold": matches,
        "no_answer_score": record.get("no_answer_score"),
    }, not matches


def _choice(record: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    label = record.get("label")
    correct = None if label is None else record.get("prediction") == label
    return {
        "id": record.get("id"),
        "prediction": record.get("prediction"),
        "label": label,
        "scores": record.get("scores"),
        "prediction_norm": record.get("prediction_norm"),
        "correct": correct,
    }, correct is False


def classified_rows(path: Path) -> Iterator[tuple[dict[str, Any], bool]]:
    """Each row of a classification predictions file (`index`, `prediction`[, `label`]): the
    predicted label beside the gold one; wrong when both are there and differ."""
    with path.open(encoding="utf-8") as lines:
        header = next(lines, "").rstrip("\n").split("\t")
        if header[:2] != ["index", "prediction"]:
            raise DataError(f"{path}, line 1: not a predictions file (its header is not index, prediction[, label])")
        for line in lines:
            cols = line.rstrip("\n").split("\t")
            label = cols[2] if len(cols) > 2 else None
            correct = None if label is None else cols[1] == label
            yield (
                {"id": cols[0], "prediction": cols[1] if len(cols) > 1 else None, "label": label, "correct": correct},
                correct is False,
            )


def run_confusion(run_dir: str | None) -> dict[str, Any] | None:
    """The run's confusion report (CONFUSION_FILE), or None where it wrote none or the file does
    not read as a JSON object (the examples are still served)."""
    path = Path(str(run_dir)) / CONFUSION_FILE if run_dir else None
    if path is None or not path.is_file():
        return None
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def sampled_kind(stored: dict[str, Any]) -> str | None:
    """The kind a row's samples are read as: its task kind; a row stored before `task_kind` with
    prediction stats (class counts) is a classification's, without them a regression's."""
    kind = summary_task_kind(stored)
    if kind is None and isinstance(stored.get("prediction_stats"), dict) and stored["prediction_stats"]:
        return "classification"
    return kind


def tag_columns(run_dir: str) -> tuple[int | None, int | str | None]:
    """(token column, label column) of the run's reader (task.data in its config.yaml); the
    defaults (first, last) where the config is gone. A named label column is CoNLL-U's."""
    task = (resolved_config(run_dir) or {}).get("task")
    data = task.get("data") if isinstance(task, dict) else None
    data = data if isinstance(data, dict) else {}
    label, token = data.get("label_column"), data.get("token_column")
    if isinstance(label, str):
        return CONLLU_FORM_INDEX, CONLLU_LABEL_INDEX.get(label)
    return (token if isinstance(token, int) else 0), (label if isinstance(label, int) else -1)


def tagged_sentences(path: Path, token_column: int, label_column: int | None) -> Iterator[dict[str, Any]]:
    """Each sentence of a tagged predictions file: its words with gold and predicted tags. The
    prediction is the last column; the input's columns come before it."""
    words: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            cols = line.rstrip("\n").split("\t")
            if not line.strip():
                if words:
                    yield {"words": words, "errors": sum(1 for w in words if w["error"])}
                    words = []
                continue
            width = len(cols) - 1  # the input's columns
            if width < 1:
                raise DataError(f"{path}, line {number}: a word line needs its input columns and a predicted tag")
            gold = cols[label_column % width] if label_column is not None and width > 1 else None
            words.append(
                {
                    "word": cols[token_column % width],
                    "gold": gold,
                    "predicted": cols[-1],
                    "error": gold is not None and gold != cols[-1],
                }
            )
    if words:
        yield {"words": words, "errors": sum(1 for w in words if w["error"])}


def prediction_samples_view(
    session: Session, job_id: int, split: str | None, limit: int, offset: int, errors_only: bool = False
) -> dict[str, Any]:
    """Examples `offset`..`offset + limit` of one split (default: the first evaluation split) of a
    fine-tune job's predictions, with the split's count and the splits there are; no example and
    `missing` (why) when the run kept none. NotFoundError when the job has no finetune result, its
    task kind has no samples, or a split asked for is not on this machine."""
    found = job_result(session, job_id, "finetune")
    job, result_id, stored, summary = found.job, found.result_id, found.stored, found.summary
    # an older row's task kind shows in fields the contract does not declare: read from the row as stored
    kind, task = sampled_kind(stored), summary.task or ""
    if kind not in SAMPLED_KINDS:
        raise NotFoundError(
            f"job {job_id}: task {task} ({kind or 'regression'}) has no prediction samples; "
            f"kinds with samples: {', '.join(SAMPLED_KINDS)}"
        )
    run_dir = summary.run_dir or job.run_dir
    # under the run folder, never a path read from the row: the API reads no file a summary names
    folder = Path(str(run_dir)) / PREDICTIONS_DIR if run_dir else None
    splits = prediction_splits(folder, kind, task) if folder is not None else []
    if split is None and splits:
        split = splits[0]
    path = folder / _file_name(kind, split, task) if folder is not None and split else None
    confusion = run_confusion(run_dir)
    answer = {
        "job_id": job_id,
        "result_id": result_id,
        "task": task,
        "kind": kind,
        "split": split,
        "splits": splits,
        "errors_only": errors_only,
        "limit": limit,
        "offset": offset,
        "confusion": confusion,
    }
    if not splits and split is None:
        # nothing kept with the run (stage.write_predictions=false, or its folder is on another
        # machine): its report alone where it wrote one, and why there are no examples
        where = f"{folder}" if folder is not None else "no run folder recorded"
        return {**answer, "total": 0, "examples": [], "missing": f"no predictions file under {where}"}
    if path is None or not path.is_file():
        raise NotFoundError(
            f"job {job_id}: its {split or ''} predictions ({path or PREDICTIONS_DIR}) are not on "
            f"this machine" + (f"; splits: {', '.join(splits)}" if splits else "")
        )
    if kind == "token_classification":
        records = ((s, s["errors"] > 0) for s in tagged_sentences(path, *tag_columns(str(run_dir))))
    elif kind == "classification":
        records = classified_rows(path)
    else:
        shown = {"generation": _generation, "span_extraction": _span, "multiple_choice": _choice}[kind]
        records = (shown(r) for r in _json_lines(path))
    total, page = 0, []
    for index, (record, wrong) in enumerate(records):
        if errors_only and not wrong and kind != "generation":
            continue
        if offset <= total < offset + limit:
            page.append({"index": index, **record})
        total += 1
    return {**answer, "total": total, "examples": page}
