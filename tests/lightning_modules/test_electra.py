"""ELECTRA pair: discriminator parity with Hugging Face ElectraModel, embeddings shared with the
generator, only the discriminator exported (and reloadable), the configs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from transformers import PreTrainedTokenizerFast

from lightning_modules.artifacts.backbone_export import export_backbone, load_exported_backbone
from lightning_modules.models.electra import ElectraEncoder, ElectraPair
from ptmlab.errors import ConfigError

VOCAB = 40
CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model"


def tiny_pair(**kw):
    args = dict(
        vocab_size=VOCAB,
        embedding_size=16,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        intermediate_size=64,
        generator_hidden_size=8,
        generator_num_heads=2,
        generator_intermediate_size=16,
        max_position_embeddings=24,
        dropout=0.0,
        attention_dropout=0.0,
    )
    return ElectraPair(**{**args, **kw}).eval()


def batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, VOCAB, (2, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    ids[mask == 0] = 0
    return ids, mask, (torch.arange(9) >= 4).long().expand(2, 9)


@pytest.mark.parametrize("embedding_size", [16, 32])  # projected (E != H) and not (E = H)
def test_discriminator_parity_with_hf_electra_model(embedding_size):
    torch.manual_seed(0)
    pair = tiny_pair(embedding_size=embedding_size)
    disc = pair.discriminator
    with torch.no_grad():
        for p in disc.parameters():
            p.add_(0.05 * torch.randn_like(p))
    assert (disc.embeddings.projection is None) == (embedding_size == 32)
    theirs = pair.to_hf()
    ids, mask, types = batch()
    with torch.no_grad():
        mine = pair(ids, attention_mask=mask, token_type_ids=types)
        ref = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True)
    assert len(mine.hidden_states) == len(ref.hidden_states) == 3
    for a, b in zip(mine.hidden_states, ref.hidden_states):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    back = ElectraEncoder.from_hf(theirs).eval()
    with torch.no_grad():
        torch.testing.assert_close(back(ids, mask, types).last_hidden_state, mine.last_hidden_state)


def test_generator_and_discriminator_share_embeddings_but_not_projections():
    pair = tiny_pair()
    gen, disc = pair.generator, pair.discriminator
    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings", "layer_norm"):
        assert getattr(gen.embeddings, name) is getattr(disc.embeddings, name)
    assert gen.embeddings.projection.weight.shape == (8, 16) and disc.embeddings.projection.weight.shape == (32, 16)
    assert pair.get_input_embeddings() is gen.get_input_embeddings()
    assert (pair.hidden_size, pair.num_layers, pair.vocab_size, pair.family) == (32, 2, VOCAB, "electra")
    ids, mask, types = batch()
    pair.generator(ids, mask, types).last_hidden_state.sum().backward()  # generator's MLM reaches the table
    assert pair.get_input_embeddings().weight.grad is not None
    unique = {id(p) for p in pair.parameters()}
    assert len(unique) == len(list(pair.parameters()))
    assert sum(p.numel() for p in pair.parameters()) < (
        sum(p.numel() for p in gen.parameters()) + sum(p.numel() for p in disc.parameters())
    )
    with pytest.raises(ConfigError, match="generator_hidden_size=64"):
        tiny_pair(generator_hidden_size=64)


def word_level_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {
        t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(VOCAB - 5)])
    }
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )


def test_export_keeps_the_discriminator_only(tmp_path):
    model_cfg = OmegaConf.load(CONF_MODEL / "electra_tiny.yaml")
    assert model_cfg.family == "electra"
    model_cfg.backbone.vocab_size = VOCAB  # the stage resolves ${tokenizer.vocab_size} in the full config
    pair = instantiate(model_cfg.backbone).eval()
    out_dir = export_backbone(pair, model_cfg, word_level_tokenizer(), tmp_path / "export", vocab_size=VOCAB)
    backbone, cfg, tokenizer = load_exported_backbone(out_dir)
    assert type(backbone) is ElectraEncoder and cfg.family == "encoder" and cfg.exported_from == "electra"
    assert cfg.name == "electra_tiny" and len(tokenizer) == VOCAB
    state = torch.load(out_dir / "backbone.pt", weights_only=True)
    assert not any(k.startswith("generator.") for k in state)
    ids, mask, types = batch()
    with torch.no_grad():
        torch.testing.assert_close(
            backbone.eval()(ids, mask, types).last_hidden_state, pair(ids, mask, types).last_hidden_state
        )
    assert (out_dir / "hf" / "config.json").exists()  # an ElectraModel
    assert '"model_type": "electra"' in (out_dir / "hf" / "config.json").read_text()


def test_small_config_sizes():
    cfg = OmegaConf.load(CONF_MODEL / "electra_small.yaml")
    assert (cfg.backbone.embedding_size, cfg.backbone.hidden_size, cfg.backbone.generator_hidden_size) == (128, 256, 64)
