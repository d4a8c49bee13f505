"""Job progress as text (ptmlab.cli.progress_bars): the bar line, and a board that redraws in
place on a terminal and prints a job again into a file only when it moved on."""

from __future__ import annotations

import io

from ptmlab.cli.progress_bars import ProgressBoard, job_line, progress_text


def job(step, status="running", total=200, **extra):
    return {
        "id": 7,
        "name": "finetune-sst2",
        "stage": "finetune",
        "status": status,
        "progress": {
            "phase": "training",
            "step": step,
            "total_steps": total,
            "metrics": {"train/loss": 0.41234, "lr": 1e-5},
            "eta_s": 125.0,
            **extra,
        },
    }


def test_the_line_says_name_bar_step_loss_and_eta():
    assert (
        job_line(job(50))
        == "    7 finetune-sst2            running   [#####---------------] 50/200 loss 0.4123 ETA 2m05s"
    )
    assert progress_text(job(200)["progress"], "succeeded") == "[####################] 200/200 loss 0.4123"
    assert (
        progress_text({"step": 3, "total_steps": None, "metrics": {}, "phase": "extracting activations"}, "running")
        == "step 3 extracting activations"
    )
    assert progress_text(None, "queued") == "" and job_line({"id": 1, "stage": "sleep", "status": "queued"}).endswith(
        "queued"
    )


def test_into_a_file_a_job_is_printed_again_only_when_it_moved_on_a_tenth():
    out = io.StringIO()
    board = ProgressBoard(out, tty=False)
    for step in (1, 5, 19, 20, 21, 39, 40, 200):
        board.draw([job(step, status="running" if step < 200 else "succeeded")])
    lines = out.getvalue().splitlines()
    assert [ln.split("] ", 1)[1].split()[4] for ln in lines] == ["1/200", "20/200", "40/200", "200/200"]


def test_on_a_terminal_the_lines_are_redrawn_in_place():
    out = io.StringIO()
    board = ProgressBoard(out, tty=True)
    board.draw([job(1), {**job(2), "id": 8}])
    board.draw([job(3), {**job(4), "id": 8}])
    text = out.getvalue()
    assert text.count("\x1b[2F") == 1 and text.count("\x1b[2K") == 4 and text.endswith("4/200 loss 0.4123 ETA 2m05s\n")
