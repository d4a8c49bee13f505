"""UniLM's sequence-to-sequence mask fine-tuned for generation (issue 24 item 2): source and target in
one sequence, the source attending both ways, the target causally, the loss on the target only
(heads/unilm_generation_model.py). No Hugging Face model has that mask, so `generate()` searches over
a recomputing twin (heads/recomputing_generator.py): its logits are the task model's own at every
step, its greedy tokens those of a naive argmax loop, and a tiny UniLM learns the synthetic reversal
of test_generation.py through the finetune stage (greedy and beam)."""

from __future__ import annotations

import pytest
import torch
from test_decoder_generation import files, fine_tuned, load_last_weights, overrides
from test_generation import word_tokenizer

from lightning_modules.tasks.seq2seq_encoding import IGNORE


def tiny_unilm_model(tokenizer):
    from lightning_modules.heads.generation_model_for import generation_model_for
    from lightning_modules.models.unilm import UnilmEncoder

    torch.manual_seed(0)
    backbone = UnilmEncoder(
        len(tokenizer),
        hidden_size=32,
        num_layers=2,
        num_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        dropout=0.0,
        attention_dropout=0.0,
    )
    return generation_model_for(backbone, task_name="t").eval()


def encoded(model, tokenizer, sources, targets):
    enc = model.input_encoder(tokenizer, 8)
    items = [
        {"input_ids": s, "target_ids": t, "example_index": i}
        for i, (s, t) in enumerate(zip(enc.encode_sources(sources), enc.encode_targets(targets)))
    ]
    return enc, items


def test_the_seq2seq_mask_hides_the_target_from_the_source_and_the_future(word_tokenizer):
    from lightning_modules.heads.unilm_generation_model import UnilmGenerationModel

    model = tiny_unilm_model(word_tokenizer)
    assert isinstance(model, UnilmGenerationModel)
    enc, items = encoded(model, word_tokenizer, ["red green blue"], ["blue green red"])
    batch = enc.collate(items)
    prompt = len(items[0]["input_ids"])
    assert batch["labels"][0, : prompt - 1].eq(IGNORE).all()  # loss on the target only
    logits = model(batch)
    changed = dict(batch, input_ids=batch["input_ids"].clone())
    changed["input_ids"][0, prompt + 1] = word_tokenizer.convert_tokens_to_ids("gold")  # the 2nd target token
    after = model(changed)
    # the source and the target before it never see it; the source's first token sees the whole source
    assert torch.equal(after[0, : prompt + 1], logits[0, : prompt + 1])
    assert not torch.allclose(after[0, prompt + 1 :], logits[0, prompt + 1 :])
    changed["input_ids"][0, 2] = word_tokenizer.convert_tokens_to_ids("pink")  # a later source token
    assert not torch.allclose(model(changed)[0, 1], after[0, 1])


def test_recomputing_twin_gives_the_task_models_logits_and_greedy_is_a_naive_loop(word_tokenizer):
    from lightning_modules.heads.generation_model import decode_items
    from ptmlab.contracts.decoding import DecodingSettings

    model = tiny_unilm_model(word_tokenizer)
    enc, items = encoded(model, word_tokenizer, ["red green", "blue gold pink gray"], ["green red", "gray pink"])
    batch = enc.collate(items)
    logits, twin = model(batch), model.hf_generator()
    # left-padded prompt + teacher-forced target: every position's logits as in the training layout
    width = batch["prompt_ids"].shape[1]
    targets = torch.nn.utils.rnn.pad_sequence([torch.tensor(x["target_ids"]) for x in items], batch_first=True)
    ids = torch.cat([batch["prompt_ids"], targets], 1)  # B×P + B×N -> B×(P+N)
    mask = torch.cat([batch["prompt_attention_mask"], (targets != 0).long()], 1)
    twin.prompt_width = width
    step = twin(input_ids=ids, attention_mask=mask).logits
    for i, x in enumerate(items):
        real = len(x["input_ids"]) + len(x["target_ids"])
        pad = width - len(x["input_ids"])
        assert torch.allclose(step[i, pad : pad + real], logits[i, :real], atol=1e-5)
    greedy = decode_items(model, word_tokenizer, enc, items, DecodingSettings(max_new_tokens=6)).output_ids
    for x, out in zip(items, greedy):  # the naive loop: the training layout again at every step, argmax at the end
        row = list(x["input_ids"])
        for _ in range(6):
            one = enc.collate(
                [
                    {
                        "input_ids": x["input_ids"],
                        "target_ids": row[len(x["input_ids"]) :] or [enc.pad_id],
                        "example_index": 0,
                    }
                ]
            )
            position = len(row) - 1
            token = int(model(one)[0, position].argmax())
            row.append(token)
            if token == enc.eos_id:
                break
        assert out == row[len(x["input_ids"]) :]
    beam = decode_items(model, word_tokenizer, enc, items, DecodingSettings("beam", num_beams=3, max_new_tokens=6))
    assert len(beam.output_ids) == 2 and all(0 < len(r) <= 6 for r in beam.output_ids)


UNILM = [
    "model=unilm_tiny",
    "model.backbone.hidden_size=64",
    "model.backbone.intermediate_size=128",
    "model.backbone.num_heads=4",
    "model.backbone.dropout=0.0",
    "model.backbone.attention_dropout=0.0",
    "model.backbone.max_position_embeddings=64",
    "objective=unilm",
]


def test_a_tiny_unilm_pretrained_with_its_objective_learns_the_reversal_with_greedy_and_beam(
    files, module_ptmlab_home, tmp_path
):
    from lightning_modules.heads.generation_model import decode_split
    from lightning_modules.heads.unilm_generation_model import UnilmGenerationModel
    from lightning_modules.stages.pretrain import run_pretrain
    from lightning_modules.tasks.generation_metrics import generation_metrics
    from ptmlab.config import compose_config
    from ptmlab.contracts.decoding import DecodingSettings

    # the pretrain stage's export (20 steps of UniLM's four masks) is the backbone fine-tuned here
    pretrained = tmp_path / "pretrain"
    run_pretrain(
        compose_config(
            [
                "stage=pretrain",
                *UNILM,
                "data=text_files",
                f"data.corpus.path={files / 'corpus'}",
                "tokenizer.vocab_size=60",
                "tokenizer.min_frequency=1",
                "data.block_size=16",
                "data.batch_size=16",
                "trainer.max_steps=20",
                "trainer.val_check_interval=20",
                "trainer.limit_val_batches=1",
                "checkpoint_every_n_steps=0",
                "trainer.enable_progress_bar=false",
                "seed=3",
                f"+run_dir={pretrained}",
            ]
        )
    )
    args = [
        *overrides(files, [f"backbone={pretrained}"], epochs=UNILM_EPOCHS),
        f"task.max_train_samples={UNILM_PAIRS}",
        "stage.lr=5e-3",
    ]
    summary, parts = fine_tuned(args, tmp_path / "unilm")
    assert isinstance(parts.model, UnilmGenerationModel) and summary["backbone"]["objective"] == "unilm"
    load_last_weights(parts, tmp_path / "unilm")
    refs = [ex.label for ex in parts.task.data.splits["dev"].examples]
    beam = decode_split(
        parts.model,
        parts.resolved.tokenizer,
        parts.task,
        "dev",
        DecodingSettings("beam", num_beams=4, max_new_tokens=16),
    )
    scores = {"greedy": summary["metrics"]["bleu"], "beam": generation_metrics(["bleu"], beam.outputs, refs)[0]["bleu"]}
    print(f"held-out sacreBLEU (tiny UniLM, {UNILM_PAIRS} pairs x {UNILM_EPOCHS} epochs) {scores}")
    assert scores["greedy"] >= 95 and scores["beam"] >= 95, scores


UNILM_EPOCHS = 8
UNILM_PAIRS = 1500
