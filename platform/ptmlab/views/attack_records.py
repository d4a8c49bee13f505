"""An attack job's per-example records (`<run_dir>/attack/records.jsonl`, written by stage=attack) for
its job page: one status at a time (succeeded, failed, skipped), a page of them, the count of each,
every record's original and perturbed text as words with the changed ones marked.

The marks are a word-level diff (difflib's matching blocks over the two word lists), computed here
so that the page only draws words: a substitution marks the word on both sides, an inserted word
(a universal trigger) only on the perturbed side. A record's text is never HTML; the page puts each
word in a text node.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from ptmlab.contracts import ATTACK_RECORDS_FILE
from ptmlab.errors import DataError, NotFoundError
from ptmlab.views.job_result import job_result

STATUSES = ("succeeded", "failed", "skipped")


def word_diff(original: str, perturbed: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """([{word, changed}] of the original, the same of the perturbed): words outside difflib's
    matching blocks are changed."""
    before, after = original.split(), perturbed.split()
    kept_before: set[int] = set()
    kept_after: set[int] = set()
    # autojunk off: a frequent word ("the") must still match in a long text
    for block in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_matching_blocks():
        kept_before.update(range(block.a, block.a + block.size))
        kept_after.update(range(block.b, block.b + block.size))
    return (
        [{"word": w, "changed": i not in kept_before} for i, w in enumerate(before)],
        [{"word": w, "changed": i not in kept_after} for i, w in enumerate(after)],
    )


def _shown(record: dict[str, Any]) -> dict[str, Any]:
    perturbed = record.get("perturbed")
    original = str(record.get("original") or "")
    marked_original, marked_perturbed = (
        word_diff(original, str(perturbed))
        if perturbed is not None
        else ([{"word": w, "changed": False} for w in original.split()], None)
    )
    return {
        "index": record.get("index"),
        "id": record.get("id"),
        "status": record.get("status"),
        "label": record.get("label"),
        "prediction_before": record.get("prediction_before"),
        "prediction_after": record.get("prediction_after"),
        "queries": record.get("queries"),
        "context": record.get("context"),
        "original": marked_original,
        "perturbed": marked_perturbed,
    }


def attack_records_view(session: Session, job_id: int, status: str, limit: int, offset: int) -> dict[str, Any]:
    """Records `offset`..`offset + limit` of those with `status`, in the file's order (the sample's
    row order), with the count of each status. NotFoundError when the job has no attack result or
    its records file is gone."""
    found = job_result(session, job_id, "attack")
    job, result_id, summary = found.job, found.result_id, found.summary
    run_dir = summary.run_dir or job.run_dir
    # under the run folder, never a path read from the row: the API reads no file a summary names
    path = Path(str(run_dir)) / ATTACK_RECORDS_FILE if run_dir else None
    if path is None or not path.is_file():
        raise NotFoundError(f"job {job_id}: its attack records ({path or ATTACK_RECORDS_FILE}) are not on this machine")
    counts = dict.fromkeys(STATUSES, 0)
    page: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict) or record.get("status") not in counts:
                raise DataError(f"{path}, line {number}: not an attack record (a JSON object with a status)")
            seen = counts[record["status"]]
            counts[record["status"]] += 1
            if record["status"] == status and offset <= seen < offset + limit:
                page.append(_shown(record))
    return {
        "job_id": job_id,
        "result_id": result_id,
        "recipe": summary.recipe,
        "class_labels": summary.class_labels,
        "trigger": summary.trigger,
        "status": status,
        "total": counts[status],
        "counts": counts,
        "limit": limit,
        "offset": offset,
        "records": page,
    }
