"""A generation task's prediction file: one JSON object per example, in split order, with the
input's terms beside the output, `{"id", "source", "references": [...], "output"}` (references
absent from an unlabelled split). The metrics can be recomputed from it alone (the tests score it
with sacreBLEU and rouge-score directly)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from lightning_modules.data.task_data import Split


def write_generations(path: Path, split: Split, outputs: Sequence[str]) -> Path:
    if len(outputs) != len(split.examples):
        raise ValueError(f"{len(outputs)} outputs for the {len(split.examples)} examples of {split.name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for ex, output in zip(split.examples, outputs):
            row = {"id": ex.id, "source": ex.texts[0]}
            if split.has_labels:
                row["references"] = list(ex.label)
            row["output"] = output
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def read_generations(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
