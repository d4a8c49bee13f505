"""Text generation on decoder-only models and Hugging Face checkpoints (issue 24, second slice):
the prompt + target encoding (loss on the target only), the GPT2LMHeadModel twin `generate()` runs
on (the same logits as ptmlab's GPT, left-padded prompts included), a tiny ptmlab GPT fine-tuned on
the synthetic reversal test_generation.py's T5 learns (held-out sacreBLEU with greedy and beam
decoding) and reloaded from its export in a fresh process (the same generations), tiny Hugging Face
T5 / GPT-2 checkpoints made here with random weights fine-tuned and decoded through the same stage
(no download), and LoRA / BitFit on a generator (the twin follows the adapted weights; LoRA's
export is merged)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from test_generation import FRESH_PROCESS, SYMBOLS, reversal_pairs, symbol_tokenizer, word_tokenizer

from lightning_modules.tasks.seq2seq_encoding import IGNORE


def tiny_gpt(vocab_size: int):
    from lightning_modules.models.transformer import TransformerDecoder

    torch.manual_seed(0)
    return TransformerDecoder(
        vocab_size,
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        dropout=0.0,
        attention_dropout=0.0,
    )


def test_prompt_encoder_puts_the_loss_on_the_target_only(word_tokenizer):
    from lightning_modules.tasks.prompt_encoding import PromptEncoder

    enc = PromptEncoder(word_tokenizer, max_source_length=5, max_target_length=3)
    assert enc.separator_id == word_tokenizer.sep_token_id == enc.eos_id  # no <delim> in this vocabulary
    prompts = enc.encode_sources(["red green", "blue gold pink gray"])
    assert word_tokenizer.convert_ids_to_tokens(prompts[1]) == ["[CLS]", "blue", "gold", "pink", "[SEP]"]
    targets = enc.encode_targets(["green red", "gray pink"])
    batch = enc.collate(
        [{"input_ids": p, "target_ids": t, "example_index": i} for i, (p, t) in enumerate(zip(prompts, targets))]
    )
    ids = lambda *words: word_tokenizer.convert_tokens_to_ids(list(words))
    assert batch["input_ids"][0].tolist() == ids("[CLS]", "red", "green", "[SEP]", "green", "red", "[SEP]", "[PAD]")
    # position t predicts t + 1: the prompt's last token predicts the first target token
    assert batch["labels"][0].tolist() == [IGNORE] * 3 + ids("green", "red", "[SEP]") + [IGNORE] * 2
    assert batch["labels"][1].tolist() == [IGNORE] * 4 + ids("gray", "pink", "[SEP]") + [IGNORE]
    assert batch["attention_mask"][0].tolist() == [1] * 7 + [0]
    assert batch["prompt_ids"][0].tolist() == ids("[PAD]", "[CLS]", "red", "green", "[SEP]")  # left-padded
    assert batch["prompt_attention_mask"][0].tolist() == [0, 1, 1, 1, 1]


def test_gpt_twin_gives_the_task_models_logits_and_decodes_continuations(word_tokenizer):
    from lightning_modules.heads.causal_generation_model import CausalGenerationModel
    from lightning_modules.heads.generation_model import decode_items
    from lightning_modules.heads.generation_model_for import generation_model_for
    from ptmlab.contracts.decoding import DecodingSettings

    model = generation_model_for(tiny_gpt(len(word_tokenizer)), task_name="t").eval()
    assert isinstance(model, CausalGenerationModel)
    enc = model.input_encoder(word_tokenizer, 8)
    items = [
        {"input_ids": s, "target_ids": t, "example_index": i}
        for i, (s, t) in enumerate(
            zip(
                enc.encode_sources(["red green", "blue gold pink"]), enc.encode_targets(["green red", "pink gold blue"])
            )
        )
    ]
    batch = enc.collate(items)
    twin = model.hf_generator()
    assert type(twin).__name__ == "GPT2LMHeadModel"
    logits = model(batch)
    assert torch.allclose(
        logits, twin(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits, atol=1e-5
    )
    # a left-padded prompt's next-token logits are those at the prompt's end in the training layout
    positions = (batch["prompt_attention_mask"].cumsum(-1) - 1).clamp(min=0)
    last = twin(
        input_ids=batch["prompt_ids"], attention_mask=batch["prompt_attention_mask"], position_ids=positions
    ).logits[:, -1]
    ends = torch.tensor([len(x["input_ids"]) - 1 for x in items])
    assert torch.allclose(last, logits[torch.arange(2), ends], atol=1e-5)
    for settings in (DecodingSettings(max_new_tokens=5), DecodingSettings("beam", num_beams=3, max_new_tokens=5)):
        decoded = decode_items(model, word_tokenizer, enc, items, settings)
        assert len(decoded.outputs) == 2 and all(0 < len(row) <= 5 for row in decoded.output_ids)
    # only the continuation: the first greedy token is the argmax at the prompt's end
    first = decode_items(model, word_tokenizer, enc, items[:1], DecodingSettings(max_new_tokens=1)).output_ids[0]
    assert first == [int(logits[0, ends[0]].argmax())]


# -- a tiny ptmlab GPT learns the synthetic reversal -------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reverse")
    reversal_pairs(folder, "train", GPT_TRAIN_PAIRS, 1)
    reversal_pairs(folder, "dev", 96, 2)
    corpus = folder / "corpus"
    corpus.mkdir()
    (corpus / "doc.txt").write_text(" ".join(SYMBOLS * 40))
    return folder


def overrides(files, model: list[str], epochs: int) -> list[str]:
    return [
        "stage=finetune",
        "task=seq2seq",
        f"task.data.train.source={files / 'train.src'}",
        f"task.data.train.target={files / 'train.tgt'}",
        f"task.data.dev.source={files / 'dev.src'}",
        f"task.data.dev.target={files / 'dev.tgt'}",
        "task.max_length=24",
        "task.max_target_length=16",
        "task.generation.max_new_tokens=16",
        "task.label_smoothing=0.0",
        *model,
        "data=text_files",
        f"data.corpus.path={files / 'corpus'}",
        "tokenizer.vocab_size=60",
        "tokenizer.min_frequency=1",
        "trainer.enable_progress_bar=false",
        "checkpoint_every_n_steps=0",
        "stage.lr=1.5e-3",
        "stage.batch_size=16",
        f"stage.epochs={epochs}",
        "stage.eval_batch_size=64",
        "stage.val_every_n_epochs=100",
        "seed=3",
    ]


GPT = [
    "model=gpt_tiny",
    "model.backbone.hidden_size=64",
    "model.backbone.intermediate_size=256",
    "model.backbone.dropout=0.0",
    "model.backbone.attention_dropout=0.0",
    "model.backbone.max_position_embeddings=64",
    "objective=clm",
]
GPT_EPOCHS = 12
GPT_TRAIN_PAIRS = 1500


def fine_tuned(args: list[str], run_dir):
    """Fine-tune; then the run's summary and the stage's parts built again, as before training."""
    from lightning_modules.stages.finetune import build_finetune, run_finetune
    from ptmlab.config import compose_config

    run_finetune(compose_config([*args, f"+run_dir={run_dir}"]))
    parts = build_finetune(compose_config([*args, f"+run_dir={run_dir.parent / (run_dir.name + '_scratch')}"]))
    return json.loads((run_dir / "summary.json").read_text()), parts


def load_last_weights(parts, run_dir) -> None:
    state = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)
    parts.model.load_state_dict({k[6:]: v for k, v in state["state_dict"].items() if k.startswith("model.")})


@pytest.fixture(scope="module")
def gpt_run(files, module_ptmlab_home, tmp_path_factory):
    from lightning_modules.heads.generation_model import decode_split
    from ptmlab.contracts.decoding import DecodingSettings

    run_dir = tmp_path_factory.mktemp("runs") / "gpt"
    # a fixed tokenizer, as the T5 reversal's (test_generation.py says why): the same ids every session
    symbol_tokenizer().save_pretrained(str(run_dir.parent / "tokenizer"))
    args = [
        *overrides(files, GPT, GPT_EPOCHS),
        "tokenizer.kind=pretrained",
        f"tokenizer.path={run_dir.parent / 'tokenizer'}",
    ]
    summary, parts = fine_tuned(args, run_dir)
    load_last_weights(parts, run_dir)
    tok = parts.resolved.tokenizer
    greedy = decode_split(parts.model, tok, parts.task, "dev")
    beam = decode_split(parts.model, tok, parts.task, "dev", DecodingSettings("beam", num_beams=4, max_new_tokens=16))
    return {"dir": run_dir, "args": args, "summary": summary, "parts": parts, "greedy": greedy, "beam": beam}


def test_gpt_learns_the_reversal_with_greedy_and_beam(gpt_run):
    from lightning_modules.tasks.generation_metrics import generation_metrics

    parts = gpt_run["parts"]
    refs = [ex.label for ex in parts.task.data.splits["dev"].examples]
    scores = {how: generation_metrics(["bleu"], gpt_run[how].outputs, refs)[0]["bleu"] for how in ("greedy", "beam")}
    print(f"held-out sacreBLEU (tiny GPT) {scores}; vocabulary {len(parts.resolved.tokenizer)}")
    assert gpt_run["summary"]["metrics"]["bleu"] == pytest.approx(scores["greedy"])  # the run's own greedy decoding
    assert scores["greedy"] >= 95 and scores["beam"] >= 95, scores


def test_gpt_task_model_reloads_in_a_fresh_process_with_the_same_generations(gpt_run, module_ptmlab_home):
    env = {**os.environ, "PTMLAB_HOME": str(module_ptmlab_home)}
    proc = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, json.dumps([str(gpt_run["dir"])]), json.dumps(gpt_run["args"])],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    ((greedy, beam),) = json.loads(proc.stdout.strip().splitlines()[-1])
    assert greedy == gpt_run["greedy"].output_ids and beam == gpt_run["beam"].output_ids
    manifest = json.loads((gpt_run["dir"] / "export" / "task_model" / "task_model.json").read_text())
    assert manifest["model"]["family"] == "decoder" and manifest["tasks"]["seq2seq"]["kind"] == "generation"


# -- any Hugging Face seq2seq or causal checkpoint (model=hf) -----------------------------------------


def save_tiny_checkpoint(kind: str, tokenizer, folder, layers: int = 1):
    """A Hugging Face T5 or GPT-2 with random weights and the word-level tokenizer, saved to `folder`."""
    from transformers import GPT2Config, GPT2LMHeadModel, T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    ids = {"vocab_size": len(tokenizer), "pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.sep_token_id}
    model = (
        T5ForConditionalGeneration(
            T5Config(
                d_model=32,
                d_kv=16,
                d_ff=64,
                num_layers=layers,
                num_heads=2,
                decoder_start_token_id=tokenizer.pad_token_id,
                **ids,
            )
        )
        if kind == "t5"
        else GPT2LMHeadModel(
            GPT2Config(n_embd=32, n_layer=layers, n_head=2, n_positions=64, bos_token_id=tokenizer.cls_token_id, **ids)
        )
    )
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))


@pytest.mark.parametrize("kind, twin", [("t5", "T5ForConditionalGeneration"), ("gpt2", "GPT2LMHeadModel")])
def test_hf_checkpoint_fine_tunes_and_decodes_through_the_stage(
    kind, twin, files, word_tokenizer, module_ptmlab_home, tmp_path
):
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.generation_model import decode_split
    from lightning_modules.heads.hf_generation_model import HFGenerationModel
    from lightning_modules.tasks.generation_metrics import generation_metrics

    save_tiny_checkpoint(kind, word_tokenizer, tmp_path / kind)
    hf = ["model=hf", f"model.name_or_path={tmp_path / kind}"]
    args = [*overrides(files, hf, epochs=HF_EPOCHS), "task.max_train_samples=400", "stage.lr=5e-3"]
    summary, parts = fine_tuned(args, tmp_path / "run")
    assert isinstance(parts.model, HFGenerationModel) and type(parts.model.hf_generator()).__name__ == twin
    dev = parts.task.data.splits["dev"]
    refs = [ex.label for ex in dev.examples]
    untrained = generation_metrics(
        ["chrf"], decode_split(parts.model, parts.resolved.tokenizer, parts.task, "dev").outputs, refs
    )[0]["chrf"]
    load_last_weights(parts, tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "predictions" / "dev.jsonl").read_text().splitlines()]
    assert len(rows) == len(dev.examples) and rows[0]["source"] == dev.examples[0].texts[0]
    trained = summary["metrics"]["chrf"]
    print(
        f"{kind}: held-out chrF {untrained:.1f} with its random weights, {trained:.1f} after {HF_EPOCHS} epochs "
        f"(sacreBLEU {summary['metrics']['bleu']:.1f})"
    )
    assert trained >= untrained + 10, (untrained, summary["metrics"])
    # the export reloads as the same Hugging Face LM and decodes the same tokens
    loaded = load_task_model(tmp_path / "run")
    assert (
        decode_split(loaded.model, loaded.tokenizer, parts.task, "dev").output_ids
        == decode_split(parts.model, parts.resolved.tokenizer, parts.task, "dev").output_ids
    )


HF_EPOCHS = 3


def train_a_few_steps(model, batch, steps: int = 3, lr: float = 1e-2) -> None:
    """AdamW on the trainable parameters over one batch: the target tokens' cross-entropy."""
    import torch.nn.functional as F

    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    for _ in range(steps):
        loss = F.cross_entropy(model(batch).flatten(0, 1), batch["labels"].flatten(), ignore_index=IGNORE)  # BT×V
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


# -- adaptation modes on a generator --------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["lora", "bitfit"])
def test_lora_and_bitfit_train_a_generator_whose_twin_follows(mode, word_tokenizer):
    from lightning_modules.adaptation.bitfit import BitFit
    from lightning_modules.adaptation.lora import LoRA, has_lora
    from lightning_modules.heads.generation_model_for import generation_model_for

    model = generation_model_for(tiny_gpt(len(word_tokenizer)), task_name="t")
    adaptation = LoRA(rank=4) if mode == "lora" else BitFit()
    adaptation.prepare(model)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(("lora_" in n) if mode == "lora" else n.endswith(".bias") for n in trainable), trainable
    enc = model.input_encoder(word_tokenizer, 8)
    batch = enc.collate(
        [
            {"input_ids": s, "target_ids": t, "example_index": i}
            for i, (s, t) in enumerate(
                zip(
                    enc.encode_sources(["red green", "blue gold pink"]),
                    enc.encode_targets(["green red", "pink gold blue"]),
                )
            )
        ]
    )
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    train_a_few_steps(model, batch)
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
    model.eval()
    twin = model.hf_generator()  # LoRA: B·A folded into a copy's weights; the model keeps its LoRA layers
    assert torch.allclose(
        model(batch), twin(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits, atol=1e-5
    )
    assert has_lora(model.backbone) == (mode == "lora")


def test_lora_generator_through_the_stage_exports_merged_and_reloads(files, module_ptmlab_home, tmp_path):
    from lightning_modules.adaptation.lora import has_lora
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.generation_model import decode_split

    args = [*overrides(files, [*GPT, "adaptation=lora"], epochs=1), "task.max_train_samples=200"]
    summary, parts = fine_tuned(args, tmp_path / "lora")
    load_last_weights(parts, tmp_path / "lora")
    assert has_lora(parts.model.backbone)  # trained with LoRA layers
    loaded = load_task_model(tmp_path / "lora")
    assert not has_lora(loaded.model.backbone)  # merge=true: the export is a plain GPT
    assert (
        decode_split(loaded.model, loaded.tokenizer, parts.task, "dev").output_ids
        == decode_split(parts.model, parts.resolved.tokenizer, parts.task, "dev").output_ids
    )


@pytest.mark.parametrize(
    "model, message",
    [
        (
            [*GPT, "model.backbone.pre_layer_norm=false"],
            "TransformerDecoder has no Hugging Face generation counterpart",
        ),
        (["model=elmo_tiny", "objective=bilm"], "task.kind=generation needs an encoder-decoder .* is family lstm"),
    ],
)
def test_a_backbone_that_cannot_generate_is_refused_before_training(
    model, message, files, module_ptmlab_home, tmp_path
):
    from lightning_modules.stages.finetune import build_finetune
    from ptmlab.config import compose_config
    from ptmlab.contracts import ConfigError

    with pytest.raises(ConfigError, match=message):
        build_finetune(compose_config([*overrides(files, model, 1), f"+run_dir={tmp_path / 'run'}"]))


# -- compression of decoders and Hugging Face generators (stage=compress) ------------------------------


# layer dropping and pruning of a causal stack: the Hugging Face GPT-2 below (suite time)
@pytest.mark.parametrize("method", ["quantize_dynamic", "distill"])
def test_compression_takes_a_gpt_generator(method, gpt_run, tmp_path):
    from compress_any_kind import check_reloads_as_measured, compress, task_overrides

    common = [*task_overrides(gpt_run["args"]), "task.max_train_samples=64"]
    s = compress(gpt_run["dir"], tmp_path / method, method, common)
    check_reloads_as_measured(s, gpt_run["parts"].task)
    assert s["main_metric"] == "bleu" and s["source"]["score"] == pytest.approx(gpt_run["summary"]["metrics"]["bleu"])
    print(
        f"GPT {method}: sacreBLEU {s['compressed']['score']:.1f} (source {s['source']['score']:.1f}), decoding "
        f"{s['compressed']['generation']['latency_ms_per_example']:.2f} ms/example (source "
        f"{s['source']['generation']['latency_ms_per_example']:.2f}), size ratio {s['size_ratio']:.3f}, stage {s['wall_time_s']:.1f} s"
    )
    if method == "quantize_dynamic":  # query/key/value as int8 Linears side by side in the twin's fused c_attn
        assert s["size_ratio"] < 0.5 and s["edits"] == ["quantize"]
    else:  # a one-layer student taught per target token, beside its no-teacher control
        assert (
            s["student_layers"] == 1
            and s["compressed"]["params"] < s["source"]["params"]
            and s["control_score"] is not None
        )


@pytest.mark.parametrize("kind", ["t5", "gpt2"])
def test_compression_of_hugging_face_generators(kind, files, word_tokenizer, module_ptmlab_home, tmp_path):
    """int8 on any checkpoint; pruning (GPT-2's Conv1D too) and layer dropping on a causal LM's one
    stack; dropping or distilling layers refused on a seq2seq checkpoint (its encoder and decoder
    blocks in one list, T5's position bias in block 0)."""
    from compress_any_kind import build, check_reloads_as_measured, compress, task_overrides

    from lightning_modules.stages.compress import build_compress
    from ptmlab.contracts import ConfigError

    save_tiny_checkpoint(kind, word_tokenizer, tmp_path / kind, layers=2)
    args = [
        *overrides(files, ["model=hf", f"model.name_or_path={tmp_path / kind}"], epochs=1),
        "task.max_train_samples=64",
        "stage.lr=5e-3",
    ]
    summary, parts = fine_tuned(args, tmp_path / "run")
    common = task_overrides(args)
    methods = ["quantize_dynamic"] + (["prune_magnitude", "drop_layers"] if kind == "gpt2" else [])
    for method in methods:
        s = compress(tmp_path / "run", tmp_path / method, method, common)
        check_reloads_as_measured(s, parts.task)
        assert s["source"]["score"] == pytest.approx(summary["metrics"]["bleu"])
        if method == "prune_magnitude":
            assert (
                s["sparsity"] == pytest.approx(0.3, abs=0.01)
                and s["compressed"]["nonzero_params"] < s["source"]["nonzero_params"]
            )
        if method == "drop_layers":
            assert s["kept_layers"] == [1] and s["compressed"]["params"] < s["source"]["params"]
    if kind == "t5":
        for method in ("drop_layers", "distill"):
            with pytest.raises(ConfigError, match="compression: the layers of HFGenerator are not one list per stack"):
                build_compress(build(tmp_path / "run", tmp_path / f"refused_{method}", method, common))


def test_lora_on_a_hugging_face_gpt2_adapts_its_conv1d_layers_and_exports_merged(
    files, word_tokenizer, module_ptmlab_home, tmp_path
):
    """GPT-2's projections are Hugging Face `Conv1D` (weight in×out), not nn.Linear: peft adapts them
    with fan_in_fan_out; the rest of the checkpoint stays bit for bit, the export is merged."""
    from lightning_modules.adaptation.lora import has_lora
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.generation_model import decode_split

    save_tiny_checkpoint("gpt2", word_tokenizer, tmp_path / "gpt2")
    hf = [
        "model=hf",
        f"model.name_or_path={tmp_path / 'gpt2'}",
        "adaptation=lora",
        "adaptation.rank=4",
        "adaptation.target_modules=[c_attn]",
    ]
    args = [*overrides(files, hf, epochs=1), "task.max_train_samples=160", "task.max_eval_samples=24", "stage.lr=5e-3"]
    summary, parts = fine_tuned(args, tmp_path / "run")
    before = {n: p.detach().clone() for n, p in parts.model.named_parameters()}
    load_last_weights(parts, tmp_path / "run")
    changed = sorted(n for n, p in parts.model.named_parameters() if not torch.equal(p, before[n]))
    assert changed and all("lora_" in n and ".c_attn." in n for n in changed), changed
    loaded = load_task_model(tmp_path / "run")
    assert has_lora(parts.model.backbone) and not has_lora(loaded.model.backbone)
    assert (
        decode_split(loaded.model, loaded.tokenizer, parts.task, "dev").output_ids
        == decode_split(parts.model, parts.resolved.tokenizer, parts.task, "dev").output_ids
    )
