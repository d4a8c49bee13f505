"""LoRA, BitFit, prompt tuning and prefix tuning (Han et al.'s "delta tuning"): each trains exactly
what it claims, keeps the backbone frozen, agrees with a hand computation or with the `peft`
library on the same model, keeps attention masks right, and refuses bad settings with one line."""

from __future__ import annotations

import re

import pytest
import torch
from test_adaptation import batch, make_model, train_steps, trainable_names

from lightning_modules.adaptation.bitfit import BitFit
from lightning_modules.adaptation.lora import LoRA
from lightning_modules.adaptation.prefix_tuning import PrefixTuning
from lightning_modules.adaptation.prompt_tuning import PromptTuning
from lightning_modules.heads.task_model import TaskModel
from lightning_modules.models.transformer import TransformerDecoder, TransformerEncoder
from ptmlab.errors import ConfigError

H, V = 32, 50


def padded_batch(causal: bool = False) -> dict[str, torch.Tensor]:
    """Three rows of lengths 7, 5 and 3, padded on the right with id 1."""
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, V, (3, 7), generator=g)
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4])
    ids = ids.masked_fill(mask == 0, 1)
    lengths = mask.sum(1)
    pool = lengths - 1 if causal else torch.zeros(3, dtype=torch.long)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids), "pool_index": pool}


def row(batch_: dict, i: int) -> dict:
    """Row i alone, without its padding."""
    n = int(batch_["attention_mask"][i].sum())
    return {k: (v[i : i + 1, :n] if v.dim() == 2 else v[i : i + 1]) for k, v in batch_.items()}


def backbone_state(model) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.backbone.state_dict().items()}


# -- BitFit ---------------------------------------------------------------------------------------


def test_bitfit_trains_only_the_biases_and_the_head():
    model = make_model()
    BitFit().prepare(model)
    names = trainable_names(model)
    assert names and all(n.endswith(".bias") or n.startswith("head.") for n in names)
    assert {n for n in names if n.startswith("backbone.")} == {
        n for n, _ in model.backbone.named_parameters(prefix="backbone") if n.endswith(".bias")
    }
    changed = train_steps(model, BitFit())
    assert changed <= names and any(n.startswith("backbone.") for n in changed)


# -- LoRA -----------------------------------------------------------------------------------------


def lora_model(rank: int = 4, **kwargs) -> tuple[TaskModel, LoRA]:
    model, mode = make_model(), LoRA(rank=rank, alpha=8.0, **kwargs)
    mode.prepare(model)
    return model, mode


def test_rank_stabilized_lora_scales_the_update_by_alpha_over_the_square_root_of_the_rank():
    from peft.tuners.lora import LoraLayer

    for use_rslora, scaling in ((False, 8.0 / 4), (True, 8.0 / 4**0.5)):
        model, _ = lora_model(rank=4, use_rslora=use_rslora)
        layers = [m for m in model.backbone.modules() if isinstance(m, LoraLayer)]
        assert layers and all(m.scaling["default"] == pytest.approx(scaling) for m in layers)


def randomise_lora_b(model, seed: int = 0) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)


def test_lora_trains_only_the_low_rank_pairs_of_query_and_value_and_starts_as_the_pretrained_model():
    plain = make_model().eval()
    model, _ = lora_model()
    names = trainable_names(model)
    assert all(("lora_A" in n or "lora_B" in n) or n.startswith("head.") for n in names)
    adapted = {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in names if "lora_" in n}
    assert adapted == {"query", "value"}
    assert sum(1 for n in names if "lora_A" in n) == 3 * 2  # 3 layers × (query, value)
    b = batch()
    assert torch.equal(model.eval()(b), plain(b))  # B starts at zero: the pre-trained model
    changed = train_steps(model.train(), LoRA(rank=4))
    assert changed <= names and any("lora_B" in n for n in changed)


def test_lora_layer_computes_w_x_plus_scaled_b_a_x():
    model, mode = lora_model(rank=4)
    randomise_lora_b(model)
    layer = model.backbone.stack.layers[0].attention.query  # peft's LoRA Linear
    x = torch.randn(2, 5, H)
    base = layer.get_base_layer()
    a, bm = layer.lora_A["default"].weight, layer.lora_B["default"].weight  # r×in, out×r
    by_hand = x @ base.weight.T + base.bias + (8.0 / 4) * (x @ a.T @ bm.T)
    assert torch.allclose(layer(x), by_hand, atol=1e-6)


def test_lora_merged_and_unmerged_give_the_same_predictions_and_a_plain_backbone():
    model, mode = lora_model()
    randomise_lora_b(model)
    model.eval()
    b = padded_batch()
    unmerged = model(b)
    mode.finalize(model)
    assert mode.merged and mode.saved_node({"name": "lora"})["merged"] is True
    merged = model(b)
    assert torch.equal(unmerged.argmax(-1), merged.argmax(-1))
    assert torch.allclose(unmerged, merged, atol=1e-5)
    assert not any("lora" in n for n, _ in model.named_parameters())
    assert type(model.backbone.stack.layers[0].attention.query) is torch.nn.Linear
    plain = TransformerEncoder(
        vocab_size=V, hidden_size=H, num_layers=3, num_heads=4, intermediate_size=64, max_position_embeddings=32
    )
    plain.load_state_dict(model.backbone.state_dict())  # loads as the plain architecture, strictly


def test_lora_agrees_on_ptmlabs_own_encoder_and_its_hugging_face_twin(tmp_path):
    """The same weights and the same LoRA pairs give the same hidden states whether the backbone is
    ptmlab's TransformerEncoder or the Hugging Face BertModel it converts to."""
    from lightning_modules.models.hf import HFBackbone

    model, _ = lora_model()
    randomise_lora_b(model)
    plain = make_model()
    plain.backbone.to_hf().save_pretrained(tmp_path / "bert")
    twin = TaskModel(HFBackbone(str(tmp_path / "bert")), 3)
    LoRA(rank=4, alpha=8.0).prepare(twin)
    ours = {n: p for n, p in model.backbone.named_parameters() if "lora_" in n}
    theirs = {n: p for n, p in twin.backbone.named_parameters() if "lora_" in n}
    assert len(ours) == len(theirs) == 12
    with torch.no_grad():  # layer i's (query, value) pairs, in the same order on both sides
        for (_, src), (_, dst) in zip(
            sorted(ours.items(), key=lambda kv: _order(kv[0])),
            sorted(theirs.items(), key=lambda kv: _order(kv[0])),
            strict=True,
        ):
            dst.copy_(src)
    b = padded_batch()
    mask = b["attention_mask"].bool()
    out_ours = model.eval().backbone(b["input_ids"], b["attention_mask"], b["token_type_ids"]).last_hidden_state
    out_theirs = twin.eval().backbone(b["input_ids"], b["attention_mask"], b["token_type_ids"]).last_hidden_state
    assert torch.allclose(out_ours[mask], out_theirs[mask], atol=1e-5)


def _order(name: str) -> tuple[int, int, int]:
    layer = int(next(p for p in name.split(".") if p.isdigit()))
    return layer, 0 if ".query." in name else 1, 0 if "lora_A" in name else 1


def test_lora_refuses_a_target_that_matches_nothing_naming_the_layers_there_are():
    with pytest.raises(ConfigError) as info:
        lora_model(target_modules=["q_proj"])
    text = str(info.value)
    assert "adaptation.target_modules: 'q_proj' matches no Linear layer" in text
    assert "query" in text and "value" in text and "\n" not in text


def test_lora_refuses_a_rank_larger_than_the_layer():
    with pytest.raises(ConfigError, match=r"adaptation.rank=64 is larger than layer .* allows \(32→32: rank ≤ 32\)"):
        lora_model(rank=64)
    with pytest.raises(ConfigError, match="adaptation.rank=0: expected a positive integer"):
        LoRA(rank=0)


# -- prompt tuning --------------------------------------------------------------------------------


def test_prompt_tuning_trains_the_prompt_and_head_and_leaves_the_backbone_bit_identical():
    model, mode = make_model(), PromptTuning(num_tokens=5)
    before = backbone_state(model)
    mode.prepare(model)
    assert trainable_names(model) == {"virtual_tokens.embeddings", "head.1.weight", "head.1.bias"}
    changed = train_steps(model, mode, steps=5, lr=5e-2)
    assert changed == {"virtual_tokens.embeddings", "head.1.weight", "head.1.bias"}
    after = model.backbone.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_prompt_tuning_starts_from_the_vocabulary_or_given_words():
    class WordTokenizer:
        unk_token_id = 0

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [7 if text == "great" else 9]}

    model, mode = make_model(), PromptTuning(num_tokens=3, init="words", init_words=["great", "film"])
    mode.tokenizer = WordTokenizer()
    mode.prepare(model)
    table = model.backbone.get_input_embeddings().weight
    assert torch.equal(model.virtual_tokens.embeddings.detach(), table[[7, 9, 7]].detach())
    model, mode = make_model(), PromptTuning(num_tokens=4, init="vocab")
    mode.prepare(model)
    rows = model.virtual_tokens.embeddings.detach()
    assert all((table == r).all(-1).any() for r in rows)  # each row is some vocabulary entry's


def test_soft_prompt_is_attended_to_and_padding_still_ignored():
    model = make_model()
    PromptTuning(num_tokens=4).prepare(model)
    model.eval()
    b = padded_batch()
    out = model(b)
    for i in range(3):  # a padded row gives what the row alone gives
        assert torch.allclose(out[i : i + 1], model(row(b, i)), atol=1e-5)
    with torch.no_grad():  # not a constant shift: the embeddings' LayerNorm would remove it
        model.virtual_tokens.embeddings.add_(torch.randn(model.virtual_tokens.embeddings.shape))
    assert not torch.allclose(model(b), out, atol=1e-3)  # the prompt is attended to


def test_prompt_tuning_matches_peft_on_a_hugging_face_bert(tmp_path):
    """The same soft prompt through ptmlab's hooks and through peft's PromptEmbedding on the same
    BertModel gives the same hidden states at the text positions."""
    from peft import PromptTuningConfig, TaskType, get_peft_model
    from transformers import BertModel

    from lightning_modules.models.hf import HFBackbone

    make_model().backbone.to_hf().save_pretrained(tmp_path / "bert")
    ours = TaskModel(HFBackbone(str(tmp_path / "bert"), attn_implementation="eager"), 3)
    PromptTuning(num_tokens=4).prepare(ours)
    peft_model = get_peft_model(
        BertModel.from_pretrained(tmp_path / "bert", attn_implementation="eager"),
        PromptTuningConfig(task_type=TaskType.FEATURE_EXTRACTION, num_virtual_tokens=4),
    )
    with torch.no_grad():
        peft_model.prompt_encoder["default"].embedding.weight.copy_(ours.virtual_tokens.embeddings)
    b = padded_batch()
    ours_out = ours.eval().backbone(b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
    theirs = peft_model.eval()(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
    mask = b["attention_mask"].bool()
    assert torch.allclose(ours_out[mask], theirs[:, 4:][mask], atol=1e-5)


def test_prompt_longer_than_the_positions_allow_is_refused():
    mode = PromptTuning(num_tokens=10)
    mode.max_length = 28  # make_model's encoder has 32 positions
    with pytest.raises(
        ConfigError, match=r"adaptation.num_tokens=10 \+ task.max_length=28 = 38 exceeds the 32 positions"
    ):
        mode.prepare(make_model())


# -- prefix tuning --------------------------------------------------------------------------------


@pytest.mark.parametrize("reparameterize", [False, True])
def test_prefix_tuning_trains_prefixes_and_head_only(reparameterize):
    model, mode = make_model(), PrefixTuning(num_tokens=3, reparameterize=reparameterize, reparameterize_hidden=16)
    before = backbone_state(model)
    mode.prepare(model)
    names = trainable_names(model)
    assert all(n.startswith(("virtual_tokens.", "head.")) for n in names)
    changed = train_steps(model, mode, steps=3)
    assert any(n.startswith("virtual_tokens.") for n in changed)
    assert all(torch.equal(before[k], v) for k, v in model.backbone.state_dict().items())
    model.eval()
    b = padded_batch()
    out = model(b)
    delta = mode.delta_state(model)
    assert delta["virtual_tokens.prefix"].shape == (3, 2, 3, H)  # layers × (key, value) × P × H
    mode.finalize(model)  # the MLP's output becomes the stored prefix
    assert model.virtual_tokens.mlp is None
    assert torch.allclose(model(b), out, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_prefix_keys_and_values_are_attended_to_at_every_layer_and_padding_is_ignored(causal):
    torch.manual_seed(0)
    cls = TransformerDecoder if causal else TransformerEncoder
    model = TaskModel(
        cls(vocab_size=V, hidden_size=H, num_layers=2, num_heads=4, intermediate_size=64, max_position_embeddings=32), 3
    )
    PrefixTuning(num_tokens=3).prepare(model)
    model.eval()
    b = padded_batch(causal)
    out = model(b)
    for i in range(3):
        assert torch.allclose(out[i : i + 1], model(row(b, i)), atol=1e-5)
    for layer in range(2):  # every layer's prefix matters
        with torch.no_grad():
            model.virtual_tokens.prefix[layer].add_(torch.randn(model.virtual_tokens.prefix[layer].shape))
        moved = model(b)
        assert not torch.allclose(moved, out, atol=1e-4)
        out = moved
    states = model.backbone(b["input_ids"], b["attention_mask"]).hidden_states
    assert all(h.shape[1] == b["input_ids"].shape[1] for h in states)  # prefix never predicted


def test_prefix_agrees_on_ptmlabs_own_encoder_and_its_hugging_face_twin(tmp_path):
    """The same prefixes on TransformerEncoder and on the BertModel it converts to give the same
    hidden states: positions follow on from the prefix and the masks agree on both."""
    from lightning_modules.models.hf import HFBackbone

    ours = make_model()
    ours.backbone.to_hf().save_pretrained(tmp_path / "bert")
    twin = TaskModel(HFBackbone(str(tmp_path / "bert")), 3)
    PrefixTuning(num_tokens=3).prepare(ours)
    PrefixTuning(num_tokens=3).prepare(twin)
    with torch.no_grad():
        ours.virtual_tokens.prefix.copy_(torch.randn(ours.virtual_tokens.prefix.shape))
        twin.virtual_tokens.prefix.copy_(ours.virtual_tokens.prefix)
    b = padded_batch()
    mask = b["attention_mask"].bool()
    a = ours.eval().backbone(b["input_ids"], b["attention_mask"], b["token_type_ids"]).last_hidden_state
    t = twin.eval().backbone(b["input_ids"], b["attention_mask"], b["token_type_ids"]).last_hidden_state
    assert torch.allclose(a[mask], t[mask], atol=1e-5)


def test_prefix_tuning_refuses_shared_layers():
    from lightning_modules.models.albert import AlbertEncoder

    model = TaskModel(
        AlbertEncoder(
            vocab_size=V,
            embedding_size=16,
            hidden_size=H,
            num_layers=2,
            num_heads=4,
            intermediate_size=64,
            max_position_embeddings=32,
        ),
        3,
    )
    with pytest.raises(ConfigError, match="shares one layer across the stack"):
        PrefixTuning(num_tokens=2).prepare(model)


# -- through the stage -----------------------------------------------------------------------------

BAD_SETTINGS = {
    "lora-target": (
        ["adaptation=lora", "adaptation.target_modules=[q_proj]"],
        "adaptation.target_modules: 'q_proj' matches no Linear layer",
    ),
    "lora-rank": (["adaptation=lora", "adaptation.rank=200"], "adaptation.rank=200 is larger than layer"),
    "prompt-length": (
        ["adaptation=prompt_tuning", "adaptation.num_tokens=60", "task.max_length=64"],
        "adaptation.num_tokens=60 + task.max_length=64",
    ),
}


def finetune_overrides(tmp_path, overrides: list[str]) -> list[str]:
    from test_task_model import common_overrides

    return [
        "stage=finetune",
        *common_overrides(tmp_path),
        "model.backbone.max_position_embeddings=64",
        "task=glue/sst2",
        "task.max_length=32",
        "task.max_train_samples=16",
        "task.max_eval_samples=16",
        *overrides,
    ]


@pytest.mark.parametrize("case", list(BAD_SETTINGS))
def test_bad_settings_are_refused_before_training(case, data_dir, module_ptmlab_home, tmp_path, monkeypatch):
    """In process, where ptmlab.run meets them: the prompt length at compose time; LoRA's in the
    preflight (the layers of the backbone built on the meta device) and again in build_finetune,
    which checks the built model (a referenced backbone's layers are known only once it loads).
    Exit 2 and one line through the entry point: the finetune stage's one run (stage_preflight.py)."""
    from lightning_modules.adaptation.read_ahead import task_data_and_adaptation
    from lightning_modules.stages.finetune import build_finetune
    from ptmlab.config import compose_config

    overrides, message = BAD_SETTINGS[case]
    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        cfg = compose_config(finetune_overrides(tmp_path, overrides))
        task_data_and_adaptation(cfg)
    assert "\n" not in str(raised.value)  # the one line ptmlab.run prints
    if case.startswith("lora"):
        with pytest.raises(ConfigError, match=re.escape(message)):
            build_finetune(cfg)
