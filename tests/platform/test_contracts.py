"""The typed summary contract (ptmlab.contracts): what stages write is what the platform reads."""

from __future__ import annotations

import subprocess
import sys

import pytest
from synthetic_results import synthetic_summaries

from ptmlab.contracts import SUMMARY_BY_KIND, ConfigError, validate_summary
from ptmlab.contracts.summaries import CompressSummary, Measurement


def test_every_synthetic_summary_validates_against_its_kind():
    kinds = {validate_summary(s).stage for s in synthetic_summaries(300)}
    assert kinds == {"finetune", "compress", "probe"}


@pytest.mark.parametrize(
    "change, named",
    [
        ({"seed": "abc"}, "seed"),
        ({"metrics": {"accuracy": "high"}}, "metrics.accuracy"),
        ({"trainable_params": -1}, "trainable_params"),
        ({"stage": "nosuch"}, "nosuch"),
    ],
)
def test_a_broken_summary_is_refused_naming_the_field(change, named):
    summary = next(s for s in synthetic_summaries(40) if s["stage"] == "finetune")
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        validate_summary({**summary, **change})
    missing = dict(summary)
    del missing["main_metric"]
    with pytest.raises(ConfigError, match="main_metric"):
        validate_summary(missing)


def test_compress_and_probe_contracts_carry_what_their_pages_read():
    compress = SUMMARY_BY_KIND["compress"].model_fields
    for field in ("method", "config", "source_ref", "compressed", "source", "retention", "measurement"):
        assert field in compress
    # the source and the compressed model are one type: every number of one has its twin
    assert compress["compressed"].annotation is Measurement and compress["source"].annotation == Measurement | None
    not_measured = ("source_ref", "source_run", "source_dir")  # which source, not its numbers
    assert not [name for name in compress if name.startswith("source_") and name not in not_measured]
    probe = SUMMARY_BY_KIND["probe"].model_fields
    for field in ("probe_task", "layers", "baselines", "alignment", "attention_heads"):
        assert field in probe


def test_a_compress_row_stored_flat_reads_as_its_two_measurements():
    """Rows the worker stored before `source` and `compressed` were measurements: the compressed
    model's numbers at the top level, the source's as `source_*`, `source` the reference."""
    old = {
        "stage": "compress",
        "seed": 3,
        "wall_time_s": 2.0,
        "method": "prune_magnitude",
        "source": "job:7",
        "source_run": "abc",
        "task": "sst2",
        "main_metric": "accuracy",
        "score": 0.85,
        "metrics": {"accuracy": 0.85},
        "params": 90,
        "nonzero_params": 45,
        "size_bytes": 360,
        "non_embedding_size_bytes": 200,
        "flops": 1e6,
        "latency_ms": 2.0,
        "latency": {"b1_t1": {"latency_ms": 2.0, "threads": 1, "batch_size": 1}},
        "source_score": 0.9,
        "source_metrics": {"accuracy": 0.9},
        "source_params": 90,
        "source_nonzero_params": 90,
        "source_size_bytes": 360,
        "source_non_embedding_size_bytes": 200,
        "source_flops": 1e6,
        "source_latency_ms": 2.5,
        "source_latency": {"b1_t1": {"latency_ms": 2.5, "threads": 1, "batch_size": 1}},
        "generation": None,
        "source_generation": None,
        "retention": 0.944,
        "sparsity": 0.5,
    }
    summary = validate_summary(old)
    assert isinstance(summary, CompressSummary) and summary.source_ref == "job:7" and summary.source_run == "abc"
    assert summary.compressed == Measurement(
        score=0.85,
        metrics={"accuracy": 0.85},
        params=90,
        nonzero_params=45,
        size_bytes=360,
        non_embedding_size_bytes=200,
        flops=1e6,
        latency_ms=2.0,
        latency={"b1_t1": {"latency_ms": 2.0, "threads": 1, "batch_size": 1}},
    )
    assert summary.source == Measurement(
        score=0.9,
        metrics={"accuracy": 0.9},
        params=90,
        nonzero_params=90,
        size_bytes=360,
        non_embedding_size_bytes=200,
        flops=1e6,
        latency_ms=2.5,
        latency={"b1_t1": {"latency_ms": 2.5, "threads": 1, "batch_size": 1}},
    )
    assert summary.retention == 0.944 and summary.sparsity == 0.5 and not summary.model_extra
    # the dump is the new shape and reads back the same; a row with no source numbers has no source
    assert validate_summary(summary.model_dump(mode="json")) == summary
    bare = validate_summary({k: v for k, v in old.items() if not k.startswith("source_")})
    assert bare.source is None and bare.compressed.score == 0.85
    with pytest.raises(ConfigError, match=r"compressed\.params"):
        validate_summary({**old, "params": -1})


def test_a_stored_row_reads_as_its_model_even_without_a_field_required_since():
    from ptmlab.contracts.summaries import read_stored_summary

    row = {"stage": "compress", "method": "none", "source": "m", "task": "rte", "score": 0.6}  # no seed, no time
    summary = read_stored_summary(row)
    assert isinstance(summary, CompressSummary) and summary.seed is None and summary.source_ref == "m"
    assert summary.compressed.score == 0.6 and summary.source is None
    # a field of the wrong type: not a summary the views can read (new_result refuses it, migration
    # 0008 dropped it from older rows); a kind with no contract (recorded by hand): its common fields
    assert read_stored_summary({**row, "score": "high"}) is None and read_stored_summary([]) is None
    hand = read_stored_summary({"stage": "x", "score": 0.5})
    assert type(hand).__name__ == "StoredStageSummary" and (hand.stage, hand.seed, hand.score) == ("x", None, 0.5)


def test_a_stored_rows_nested_fields_required_since_read_as_none_and_a_bad_value_is_salvaged():
    from ptmlab.contracts.summaries import ProbeLayer, ProbeSummary, read_stored_summary, salvaged_summary

    row = {
        "stage": "probe",
        "model": "m",
        "probe_task": "pos",
        "seed": 1,
        "wall_time_s": 1.0,
        "tasks": [{"probe_task": "pos", "layers": [{"accuracy": 0.6}]}],
    }  # no family, no layer index
    summary = read_stored_summary(row)
    assert isinstance(summary, ProbeSummary) and isinstance(summary.tasks[0].layers[0], ProbeLayer)
    assert summary.tasks[0].family is None and summary.tasks[0].layers[0].layer is None
    broken = {**row, "layers": ["x", {"layer": 1, "accuracy": "n/a", "uuas": 0.4}], "attention_heads": 5}
    assert read_stored_summary(broken) is None
    salvaged = salvaged_summary(broken)  # the bad values left out, the rest as stored
    assert [(e.layer, e.accuracy, e.uuas) for e in salvaged.layers] == [(1, None, 0.4)]
    assert salvaged.attention_heads is None and salvaged.tasks == summary.tasks
    assert salvaged_summary(row) == summary and salvaged_summary([]) is None
    hand = salvaged_summary({"stage": "x", "score": 0.5})  # a kind with no contract: the common fields
    assert type(hand).__name__ == "StoredStageSummary" and (hand.stage, hand.seed, hand.score) == ("x", None, 0.5)


def test_a_compress_rows_numbers_lead_the_generic_tables_as_they_did_flat():
    from ptmlab.contracts.summaries import measured_on_top
    from ptmlab.views.overview import headline

    row = {
        "stage": "compress",
        "seed": 1,
        "compressed": {"score": 0.7, "params": 10},
        "source": {"score": 0.9},
        "retention": 0.778,
    }
    assert measured_on_top(row) == {
        "score": 0.7,
        "params": 10,
        "stage": "compress",
        "seed": 1,
        "source": {"score": 0.9},
        "retention": 0.778,
    }
    assert list(headline(row)) == ["score", "params", "retention"]  # the overview's recent results
    assert measured_on_top({"stage": "finetune", "main_score": 0.8}) == {"stage": "finetune", "main_score": 0.8}


def test_contracts_import_nothing_else_of_ptmlab_and_no_torch():
    code = (
        "import sys; import ptmlab.contracts; "
        "bad = [m for m in sys.modules if (m.startswith('ptmlab.') and not m.startswith('ptmlab.contracts')) "
        "or m == 'torch']; print(bad); assert not bad"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_declarations_import_only_the_contracts_and_no_torch():
    """ptmlab.methods is the other leaf lightning_modules imports (each method's declaration)."""
    code = (
        "import sys, pkgutil, importlib, ptmlab.methods; "
        "[importlib.import_module('ptmlab.methods.' + m.name) for m in pkgutil.iter_modules(ptmlab.methods.__path__)]; "
        "bad = [m for m in sys.modules if (m.startswith('ptmlab.') and not m.startswith(('ptmlab.contracts', "
        "'ptmlab.methods'))) or m in ('torch', 'lightning_modules')]; print(bad); assert not bad"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_url_passwords_are_redacted_wherever_they_stand():
    from ptmlab.contracts.secrets import redact_url_passwords

    text = "uri=postgresql+psycopg://ptm:s3cr%21t@db:5432/x, http://u:p@h/ and sqlite:///a/b user:pw plain"
    assert redact_url_passwords(text) == (
        "uri=postgresql+psycopg://ptm:***@db:5432/x, http://u:***@h/ and sqlite:///a/b user:pw plain"
    )


@pytest.mark.parametrize(
    "change, named",
    [
        ({"trigger_tokens": ["bad"]}, "trigger_tokens.0"),
        ({"trigger_search": {"examples": 3, "queries": 9, "iterations": -1}}, "trigger_search.iterations"),
        ({"attacked_text": "third"}, "attacked_text"),
        ({"class_labels": "0,1"}, "class_labels"),
    ],
)
def test_an_attack_summarys_trigger_and_sample_fields_are_typed(change, named):
    summary = {
        "stage": "attack",
        "seed": 5,
        "wall_time_s": 1.0,
        "recipe": "triggers",
        "source": "/runs/ft",
        "task": "sst2",
        "num_examples": 4,
        "constraints": {},
        "clean_accuracy": 1.0,
        "accuracy_under_attack": 0.25,
        "seconds_per_example": 0.1,
        "label": "1",
        "class_labels": ["0", "1"],
        "trigger": "bad bad bad",
        "trigger_tokens": [7, 7, 7],
        "trigger_search": {
            "examples": 4,
            "queries": 30,
            "iterations": 1,
            "history": [
                {"iteration": 0, "trigger": "the the the", "loss": 0.1, "accuracy": 1.0},
                {"iteration": 1, "trigger": "bad bad bad", "loss": 2.3, "accuracy": 0.25},
            ],
        },
    }
    row = validate_summary(summary).model_dump()  # what the worker stores: declared, so typed
    assert row["trigger_search"]["history"][1] == {
        "iteration": 1,
        "trigger": "bad bad bad",
        "loss": 2.3,
        "accuracy": 0.25,
    }
    assert row["trigger_tokens"] == [7, 7, 7] and row["label"] == "1" and row["source_defence"] is None
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        validate_summary({**summary, **change})


def test_the_overviews_headline_of_a_probe_row_is_its_best_layer_even_from_a_partly_broken_row():
    from ptmlab.db.summary_migration import upgraded_summary
    from ptmlab.views.overview import headline

    probe = {
        "stage": "probe",
        "model": "m",
        "probe_task": "pos",
        "seed": 1,
        "layers": [{"layer": 0, "accuracy": 0.5}, {"layer": 1, "accuracy": "n/a"}, {"layer": 2, "accuracy": 0.7}],
    }
    assert headline(upgraded_summary(probe, "probe")) == {"best_layer": 2, "accuracy": 0.7}  # stored before 0008
    assert headline({**probe, "layers": [{"layer": 0}], "probe_time_s": 3.0, "eval_sentences": 9}) == {
        "eval_sentences": 9.0
    }
