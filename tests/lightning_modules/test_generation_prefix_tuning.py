"""Prefix tuning on generators (issue 24 item 5; Li & Liang 2021 designed it for generation): one
prefix on ptmlab's GPT, one per side on its T5 and BART (adaptation/seq2seq_prefix.py). A converted
Hugging Face twin would not carry the prefix, so these decode with `generate()` over a recomputing
twin (heads/recomputing_generator.py), which first proves to give the converted twins' own tokens on
the plain models. Then: only the prefix trains (everything else bit for bit), the twin decodes the
model's own logits, the task model exports and reloads to identical generations, and what cannot
carry virtual tokens under a generation task is refused before training, naming the key."""

from __future__ import annotations

import random

import pytest
import torch
from test_decoder_generation import (
    GPT,
    files,
    fine_tuned,
    load_last_weights,
    overrides,
    save_tiny_checkpoint,
    tiny_gpt,
    train_a_few_steps,
)
from test_generation import SYMBOLS, word_tokenizer

BACKBONES = {
    "t5": "lightning_modules.models.t5.T5EncoderDecoder",
    "bart": "lightning_modules.models.encoder_decoder.TransformerEncoderDecoder",
}


def tiny_generator(kind: str, tokenizer):
    from hydra.utils import instantiate

    from lightning_modules.heads.generation_model_for import generation_model_for

    if kind == "gpt":
        backbone = tiny_gpt(len(tokenizer))
    else:
        torch.manual_seed(0)
        backbone = instantiate(
            {
                "_target_": BACKBONES[kind],
                "vocab_size": len(tokenizer),
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_heads": 2,
                "dropout": 0.0,
            }
        )
    return generation_model_for(backbone, task_name="t").eval()


def batch_of(model, tokenizer):
    enc = model.input_encoder(tokenizer, 8)
    items = [
        {"input_ids": s, "target_ids": t, "example_index": i}
        for i, (s, t) in enumerate(
            zip(
                enc.encode_sources(["red green", "blue gold pink gray"]), enc.encode_targets(["green red", "gray pink"])
            )
        )
    ]
    return enc, items, enc.collate(items)


@pytest.mark.parametrize("kind", ["t5", "bart", "gpt"])
def test_recomputing_twin_decodes_what_the_converted_twin_decodes(kind, word_tokenizer):
    from ptmlab.contracts.decoding import DecodingSettings

    model = tiny_generator(kind, word_tokenizer)
    enc, _, batch = batch_of(model, word_tokenizer)
    # a random model repeats one token; a few steps on reversals give varied, peaked outputs
    rng = random.Random(0)
    sources = [" ".join(rng.choice(SYMBOLS) for _ in range(rng.randint(2, 4))) for _ in range(32)]
    train = enc.collate(
        [
            {"input_ids": s, "target_ids": t, "example_index": i}
            for i, (s, t) in enumerate(
                zip(enc.encode_sources(sources), enc.encode_targets([" ".join(s.split()[::-1]) for s in sources]))
            )
        ]
    )
    train_a_few_steps(model, train, steps=30)
    model.eval()
    converted, recomputing = model.hf_generator(), model.recomputing_generator()
    for settings in (
        DecodingSettings(max_new_tokens=6),
        DecodingSettings("beam", num_beams=3, max_new_tokens=6),
        DecodingSettings("beam", num_beams=4, length_penalty=0.6, no_repeat_ngram_size=2, max_new_tokens=6),
    ):
        theirs = enc.generate(converted, batch, settings)
        assert torch.equal(enc.generate(recomputing, batch, settings), theirs), settings
        assert theirs.shape[1] > 2 and len(set(theirs.flatten().tolist())) > 2, theirs  # not one repeated token


@pytest.mark.parametrize("kind", ["t5", "bart", "gpt"])
def test_only_the_prefix_trains_and_the_twin_decodes_the_models_own_logits(kind, word_tokenizer):
    from lightning_modules.adaptation.prefix_tuning import PrefixTuning
    from lightning_modules.heads.generation_model import decode_items
    from lightning_modules.heads.recomputing_generator import RecomputingGenerator
    from ptmlab.contracts.decoding import DecodingSettings

    model = tiny_generator(kind, word_tokenizer)
    plain = model(batch_of(model, word_tokenizer)[2]).detach()
    PrefixTuning(num_tokens=3).prepare(model)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    sides = (
        {"virtual_tokens.encoder.prefix", "virtual_tokens.decoder.prefix"}
        if kind != "gpt"
        else {"virtual_tokens.prefix"}
    )
    assert set(trainable) == sides  # the head is a dropout: nothing else of the model trains
    enc, items, batch = batch_of(model, word_tokenizer)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model.train()
    train_a_few_steps(model, batch)
    model.eval()
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]) != (name in sides), name
    logits = model(batch)
    assert logits.shape == plain.shape and not torch.allclose(logits, plain)  # the prefix is read, text positions only
    twin = model.hf_generator()
    assert isinstance(twin, RecomputingGenerator)
    greedy = decode_items(model, word_tokenizer, enc, items, DecodingSettings(max_new_tokens=1)).output_ids
    if kind == "gpt":  # the first token is the argmax at the prompt's end, prefix included
        ends = [len(x["input_ids"]) - 1 for x in items]
    else:  # ... at the decoder's start
        ends = [0, 0]
    assert greedy == [[int(logits[i, end].argmax())] for i, end in enumerate(ends)]


@pytest.mark.parametrize("kind", ["t5", "gpt2"])
def test_hugging_face_checkpoint_takes_pefts_prefix_and_decodes_with_it(kind, word_tokenizer, tmp_path):
    """A Hugging Face LM computes its logits past ptmlab's hooks: peft's prefix tuning, its own generate()."""
    from lightning_modules.adaptation.prefix_tuning import PrefixTuning
    from lightning_modules.heads.generation_model import decode_items
    from lightning_modules.heads.generation_model_for import generation_model_for
    from lightning_modules.models.hf_generator import HFGenerator
    from ptmlab.contracts.decoding import DecodingSettings

    save_tiny_checkpoint(kind, word_tokenizer, tmp_path / kind)
    model = generation_model_for(HFGenerator(str(tmp_path / kind), pretrained=True), task_name="t")
    enc, items, batch = batch_of(model, word_tokenizer)
    plain = model(batch).detach()
    adaptation = PrefixTuning(num_tokens=3, reparameterize=True, reparameterize_hidden=16)
    adaptation.prepare(model)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(".prompt_encoder." in n for n in trainable), trainable
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    train_a_few_steps(model, batch)
    model.eval()
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]) != (name in trainable), name
    logits = model(batch)
    assert logits.shape == plain.shape and not torch.allclose(logits, plain)
    adaptation.finalize(model)  # the MLP folded into the prefix it produces: the same logits, no MLP left
    assert torch.allclose(model(batch), logits, atol=1e-5)
    assert not any(".transform." in n for n, _ in model.named_parameters())
    first = decode_items(model, word_tokenizer, enc, items, DecodingSettings(max_new_tokens=1)).output_ids
    ends = [len(x["input_ids"]) - 1 for x in items] if kind == "gpt2" else [0, 0]
    assert first == [[int(logits[i, end].argmax())] for i, end in enumerate(ends)]  # the prefix decodes too
    beam = decode_items(model, word_tokenizer, enc, items, DecodingSettings("beam", num_beams=3, max_new_tokens=4))
    assert len(beam.output_ids) == 2


def test_prompt_tuned_gpt_decodes_its_soft_prompt(word_tokenizer):
    """Prompt tuning's virtual tokens ride the same hooks: a GPT decodes them over the recomputing twin."""
    from lightning_modules.adaptation.prompt_tuning import PromptTuning
    from lightning_modules.heads.generation_model import decode_items
    from lightning_modules.heads.recomputing_generator import RecomputingGenerator
    from ptmlab.contracts.decoding import DecodingSettings

    model = tiny_generator("gpt", word_tokenizer)
    enc, items, batch = batch_of(model, word_tokenizer)
    plain = model(batch).detach()
    PromptTuning(num_tokens=3, init="random").prepare(model)
    assert [n for n, p in model.named_parameters() if p.requires_grad] == ["virtual_tokens.embeddings"]
    model.eval()
    logits = model(batch)
    assert not torch.allclose(logits, plain) and isinstance(model.hf_generator(), RecomputingGenerator)
    first = decode_items(model, word_tokenizer, enc, items, DecodingSettings(max_new_tokens=1)).output_ids
    assert first == [[int(logits[i, len(x["input_ids"]) - 1].argmax())] for i, x in enumerate(items)]


@pytest.mark.parametrize(
    "model_args",
    [
        [
            "model=t5_tiny",
            "model.backbone.hidden_size=32",
            "model.backbone.intermediate_size=64",
            "objective=span_corruption",
        ],
        GPT,
        ["model=hf"],
    ],
    ids=["t5", "gpt", "hf_gpt2"],
)
def test_prefix_tuned_generator_through_the_stage_reloads_to_the_same_generations(
    model_args, files, word_tokenizer, module_ptmlab_home, tmp_path
):
    from lightning_modules.artifacts.saved_task_model import load_task_model
    from lightning_modules.heads.generation_model import decode_split
    from ptmlab.contracts.decoding import DecodingSettings

    if model_args == ["model=hf"]:  # peft's prefix on a Hugging Face GPT-2 made here
        save_tiny_checkpoint("gpt2", word_tokenizer, tmp_path / "gpt2")
        model_args = ["model=hf", f"model.name_or_path={tmp_path / 'gpt2'}"]

    args = [
        *overrides(
            files,
            [
                *model_args,
                "adaptation=prefix_tuning",
                "adaptation.num_tokens=4",
                "adaptation.reparameterize=true",
                "adaptation.reparameterize_hidden=32",
            ],
            epochs=1,
        ),
        "task.max_train_samples=64",
        "task.max_eval_samples=24",
        "task.generation.max_new_tokens=8",
        "stage.lr=1e-2",
    ]
    summary, parts = fine_tuned(args, tmp_path / "run")
    before = {n: p.detach().clone() for n, p in parts.model.named_parameters()}
    load_last_weights(parts, tmp_path / "run")
    parts.adaptation.finalize(parts.model)  # as the stage did after training: the MLP folded into the prefix
    changed = sorted(n for n, p in parts.model.named_parameters() if not torch.equal(p, before[n]))
    assert changed and all(n.startswith("virtual_tokens.") or ".prompt_encoder." in n for n in changed), changed
    loaded = load_task_model(tmp_path / "run")
    beam = DecodingSettings("beam", num_beams=3, max_new_tokens=8)
    for settings in (None, beam):
        ours = decode_split(parts.model, parts.resolved.tokenizer, parts.task, "dev", settings).output_ids
        assert decode_split(loaded.model, loaded.tokenizer, parts.task, "dev", settings).output_ids == ours
    assert len(ours) == 24 and summary["metrics"]["bleu"] >= 0


@pytest.mark.parametrize(
    "model, message",
    [
        (
            ["model=hf", "model.name_or_path=gpt2", "adaptation=prompt_tuning"],
            "adaptation=prompt_tuning does not apply to a model.family=hf generator under task.kind=generation; it takes "
            "decoder models",
        ),
        (
            ["model=unilm_tiny", "objective=unilm", "adaptation=prefix_tuning"],
            "adaptation=prefix_tuning does not apply to a model.family=encoder generator",
        ),
        (
            ["model=t5_tiny", "objective=span_corruption", "adaptation=prompt_tuning"],
            "adaptation=prompt_tuning does not apply to a model.family=encoder_decoder generator .* it takes decoder models",
        ),
    ],
)
def test_virtual_tokens_a_generator_cannot_carry_are_refused_at_compose_time(model, message, files):
    from ptmlab.config import compose_config
    from ptmlab.contracts import ConfigError

    with pytest.raises(ConfigError, match=message) as error:
        compose_config(overrides(files, model, 1))
    assert "\n" not in str(error.value)


def test_a_backbone_a_reference_loads_is_refused_at_build_time(word_tokenizer, tmp_path):
    """`backbone=<folder>` replaces the model group after composing: the same refusal when it loads."""
    from lightning_modules.adaptation.virtual_tokens import refuse_on_generator
    from lightning_modules.models.hf_generator import HFGenerator
    from lightning_modules.models.unilm import UnilmEncoder
    from ptmlab.contracts import ConfigError

    save_tiny_checkpoint("gpt2", word_tokenizer, tmp_path / "gpt2")
    hf = HFGenerator(str(tmp_path / "gpt2"))
    refuse_on_generator(hf, "prefix_tuning", encoder_decoder_ok=True, hf_ok=True)  # peft's prefix
    with pytest.raises(ConfigError, match="adaptation=prompt_tuning does not apply to a Hugging Face checkpoint"):
        refuse_on_generator(hf, "prompt_tuning", encoder_decoder_ok=False)
    with pytest.raises(ConfigError, match="adaptation=prefix_tuning does not apply to UniLM's seq2seq generation"):
        refuse_on_generator(UnilmEncoder(len(word_tokenizer), hidden_size=32), "prefix_tuning", encoder_decoder_ok=True)
    refuse_on_generator(tiny_gpt(len(word_tokenizer)), "prompt_tuning", encoder_decoder_ok=False)  # a GPT takes both
