"""Long-sequence attention (issue 45 item 5, `model.backbone.attention`): each sparse pattern equals
full attention where it must (a window that covers the sequence) and a dense masked reference with
the same pattern where it is sparse; Linformer equals its own explicit computation; global tokens see
and are seen by all; padding is respected; a tiny model of each pattern trains through the stages'
own builder; bad settings are one ConfigError at compose time (exit 2 through `ptmlab.run`).
The presets do not state the keys (their configs, and so their config hashes, stay as they were), so
an override adds them: `+model.backbone.attention=longformer`."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch

from lightning_modules.models.attention.bigbird import BigBirdAttention
from lightning_modules.models.attention.linformer import LinformerAttention
from lightning_modules.models.attention.longformer import LongformerAttention
from lightning_modules.models.attention.sliding_window import SlidingWindowAttention
from lightning_modules.models.transformer import TransformerDecoder, TransformerEncoder
from lightning_modules.stages.pretrain import build_backbone
from ptmlab.config import compose_config
from ptmlab.contracts import ConfigError

B, HEADS, T, D = 2, 2, 23, 8  # T not a multiple of any block: the padded tail is exercised


def _qkv(seed: int = 0, length: int = T) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, HEADS, length, D, generator=g, dtype=torch.float64) for _ in range(3))  # B×heads×T×d
    return q, k, v


def _padding(length: int = T) -> torch.Tensor:
    """B×T real-token mask: the second sequence ends 5 positions early."""
    mask = torch.ones(B, length, dtype=torch.bool)
    mask[1, length - 5 :] = False
    return mask


def dense_reference(q, k, v, allowed: torch.Tensor) -> torch.Tensor:
    """softmax(q·kᵀ/√d masked to `allowed` (broadcastable to B×heads×T×T)) · v, over the whole matrix."""
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # B×heads×T×T
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v


def window_pairs(length: int, window: int, causal: bool = False) -> torch.Tensor:
    i = torch.arange(length)
    relative = i[:, None] - i[None, :]  # T×T: i - j
    allowed = relative.abs() <= window
    return allowed & (relative >= 0) if causal else allowed


def with_globals(allowed: torch.Tensor, globals_: list[int]) -> torch.Tensor:
    allowed = allowed.clone()
    allowed[..., globals_, :] = True
    allowed[..., :, globals_] = True
    return allowed


def _real_rows(x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
    """The rows of real query positions (a padding query's output is never read)."""
    return x.transpose(1, 2)[padding]  # B×heads×T×d -> (real positions)×heads×d


def _key_mask(padding: torch.Tensor) -> torch.Tensor:
    return padding[:, None, None, :]  # B×T -> B×1×1×T, as the backbone hands it over


# -- each pattern against full attention and against its dense reference -------------------------


@pytest.mark.parametrize(
    "pattern",
    [SlidingWindowAttention(T), LongformerAttention(T + 4, [0, 5]), BigBirdAttention(32, 2, HEADS, [0])],
    ids=["sliding_window", "longformer", "bigbird"],
)
def test_a_pattern_that_covers_the_sequence_is_full_attention(pattern):
    q, k, v = _qkv()
    padding = _padding()
    full = dense_reference(q, k, v, _key_mask(padding))
    sparse = pattern(q, k, v, _key_mask(padding), False, 0.0)
    torch.testing.assert_close(_real_rows(sparse, padding), _real_rows(full, padding))


@pytest.mark.parametrize("window", [1, 3, 5])
@pytest.mark.parametrize("causal", [False, True])
def test_sliding_window_equals_its_dense_masked_reference(window, causal):
    q, k, v = _qkv(window)
    padding = _padding()
    allowed = window_pairs(T, window, causal)[None, None] & _key_mask(padding)
    expected = dense_reference(q, k, v, allowed)
    got = SlidingWindowAttention(window)(q, k, v, _key_mask(padding), causal, 0.0)
    torch.testing.assert_close(_real_rows(got, padding), _real_rows(expected, padding))


def test_longformer_equals_its_dense_masked_reference_and_globals_see_and_are_seen_by_all():
    q, k, v = _qkv(1)
    padding = _padding()
    globals_ = [0, 9]
    allowed = with_globals(window_pairs(T, 2), globals_)[None, None] & _key_mask(padding)
    got = LongformerAttention(2, globals_)(q, k, v, _key_mask(padding), False, 0.0)
    torch.testing.assert_close(_real_rows(got, padding), _real_rows(dense_reference(q, k, v, allowed), padding))

    # A global query's output moves when a far key changes; a local query far from the change does
    # not, unless the changed key is global.
    far = T - 7
    v2 = v.clone()
    v2[:, :, far] += 1.0
    moved = LongformerAttention(2, globals_)(q, k, v2, _key_mask(padding), False, 0.0) - got
    assert moved[:, :, 0].abs().max() > 1e-6 and moved[:, :, 9].abs().max() > 1e-6
    assert moved[:, :, 4].abs().max() == 0
    v3 = v.clone()
    v3[:, :, 9] += 1.0
    moved = LongformerAttention(2, globals_)(q, k, v3, _key_mask(padding), False, 0.0) - got
    assert (moved[0, :, :].abs().amax(dim=-1) > 1e-6).all()  # every position of a full row sees global 9


def test_bigbird_equals_its_dense_masked_reference_and_draws_the_same_blocks_every_time():
    q, k, v = _qkv(2, length=40)
    padding = _padding(40)
    pattern = BigBirdAttention(4, 2, HEADS, [0])
    table = pattern.block_table(40, torch.device("cpu"))  # heads×n×(3 + 2)
    assert torch.equal(table, BigBirdAttention(4, 2, HEADS, [0]).block_table(40, torch.device("cpu")))
    assert table.shape == (HEADS, 10, 5) and not torch.equal(table[0], table[1])  # drawn per head
    block_of = torch.arange(40) // 4
    allowed = torch.zeros(HEADS, 40, 40, dtype=torch.bool)
    for head in range(HEADS):
        for query_block in range(10):
            keys = table[head, query_block][table[head, query_block] >= 0]
            allowed[head, block_of == query_block] |= torch.isin(block_of, keys)[None, :]
    allowed = with_globals(allowed, [0])[None] & _key_mask(padding)
    got = pattern(q, k, v, _key_mask(padding), False, 0.0)
    torch.testing.assert_close(_real_rows(got, padding), _real_rows(dense_reference(q, k, v, allowed), padding))
    # The random blocks are outside the window and distinct.
    for head in range(HEADS):
        for query_block in range(10):
            random_blocks = table[head, query_block, 3:].tolist()
            assert len(set(random_blocks)) == 2 and not set(random_blocks) & {
                query_block - 1,
                query_block,
                query_block + 1,
            }


def test_linformer_equals_its_explicit_projection_then_softmax():
    q, k, v = _qkv(3)
    padding = _padding()
    pattern = LinformerAttention(max_length=32, projected_length=6).double()
    got = pattern(q, k, v, _key_mask(padding), False, 0.0)
    real = padding[:, None, :, None].double()  # B×1×T×1: padding keys and values are zeroed
    e, f = pattern.key_projection[:, :T], pattern.value_projection[:, :T]  # k×T
    projected_k = torch.einsum("kt,bhtd->bhkd", e, k * real)
    projected_v = torch.einsum("kt,bhtd->bhkd", f, v * real)
    scores = q @ projected_k.transpose(-1, -2) / math.sqrt(D)  # B×heads×T×k
    torch.testing.assert_close(got, scores.softmax(-1) @ projected_v)
    # A padding key changes nothing.
    k2 = k.clone()
    k2[1, :, T - 1] += 10.0
    torch.testing.assert_close(pattern(q, k2, v, _key_mask(padding), False, 0.0), got)


def test_padding_keys_change_no_real_output():
    q, k, v = _qkv(4)
    padding = _padding()
    k2, v2 = k.clone(), v.clone()
    k2[1, :, T - 5 :] = 100.0
    v2[1, :, T - 5 :] = -100.0
    for pattern in (SlidingWindowAttention(3), LongformerAttention(3, [0]), BigBirdAttention(4, 1, HEADS, [0])):
        before = pattern(q, k, v, _key_mask(padding), False, 0.0)
        after = pattern(q, k2, v2, _key_mask(padding), False, 0.0)
        torch.testing.assert_close(_real_rows(after, padding), _real_rows(before, padding))


# -- through the backbone -------------------------------------------------------------------------


def _tiny(cls, **attention):
    torch.manual_seed(0)
    return cls(vocab_size=50, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32,
               max_position_embeddings=32, dropout=0.0, attention_dropout=0.0, **attention).eval()  # fmt: skip


@pytest.mark.parametrize(
    "attention",
    [
        {"attention": "sliding_window", "attention_window": 32},
        {"attention": "longformer", "attention_window": 32, "global_tokens": [0]},
        {"attention": "bigbird", "block_size": 32, "num_random_blocks": 1},
    ],
    ids=["sliding_window", "longformer", "bigbird"],
)
def test_an_encoder_whose_pattern_covers_the_sequence_computes_what_full_attention_does(attention):
    full, sparse = _tiny(TransformerEncoder), _tiny(TransformerEncoder, **attention)
    sparse.load_state_dict(full.state_dict())
    ids = torch.randint(1, 50, (2, 20))
    mask = torch.ones(2, 20, dtype=torch.long)
    mask[1, 15:] = 0
    expected = full(ids, mask).hidden_states[-1]
    got = sparse(ids, mask).hidden_states[-1]
    torch.testing.assert_close(got[mask.bool()], expected[mask.bool()], atol=1e-5, rtol=1e-5)
    assert sparse.to_hf() is None  # BertModel has no such pattern


def test_a_causal_window_sees_only_the_past():
    decoder = _tiny(TransformerDecoder, attention="sliding_window", attention_window=3)
    ids = torch.randint(1, 50, (1, 20))
    states = decoder(ids).hidden_states[-1]
    changed = ids.clone()
    changed[0, 5] = (ids[0, 5] % 49) + 1
    moved = (decoder(changed).hidden_states[-1] - states).abs().amax(dim=-1)[0]
    # No position before 5 sees it; two layers of a one-sided window of 3 carry it 6 positions on.
    assert moved[:5].max() == 0 and moved[5:12].min() > 0 and moved[12:].max() == 0
    full = _tiny(TransformerDecoder)
    covering = _tiny(TransformerDecoder, attention="sliding_window", attention_window=32)
    covering.load_state_dict(full.state_dict())
    torch.testing.assert_close(covering(ids).hidden_states[-1], full(ids).hidden_states[-1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "overrides",
    [
        ["+model.backbone.attention=sliding_window", "+model.backbone.attention_window=4"],
        [
            "+model.backbone.attention=longformer",
            "+model.backbone.attention_window=4",
            "+model.backbone.global_tokens=[0]",
        ],
        ["+model.backbone.attention=bigbird", "+model.backbone.block_size=4", "+model.backbone.num_random_blocks=1"],
        ["+model.backbone.attention=linformer", "+model.backbone.projected_length=8"],
    ],
    ids=["sliding_window", "longformer", "bigbird", "linformer"],
)
def test_a_tiny_model_of_each_pattern_trains_through_the_stages_builder(overrides):
    cfg = compose_config(
        [
            "model=bert_tiny",
            "model.backbone.hidden_size=16",
            "model.backbone.intermediate_size=32",
            "model.backbone.max_position_embeddings=32",
            "data.block_size=32",
            *overrides,
        ]  # fmt: skip
    )
    torch.manual_seed(0)
    backbone = build_backbone(cfg.model, vocab_size=40)
    assert backbone.attention == cfg.model.backbone.attention
    optimizer = torch.optim.AdamW(backbone.parameters(), lr=3e-3)
    ids = torch.randint(1, 40, (4, 24))
    mask = torch.ones_like(ids)
    mask[0, 20:] = 0
    losses = []
    for _ in range(6):
        states = backbone(ids, mask).hidden_states[-1]
        logits = states @ backbone.get_input_embeddings().weight.T  # B×T×V, tied
        loss = torch.nn.functional.cross_entropy(logits[mask.bool()], ids[mask.bool()])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]


# -- bad settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, needle",
    [
        (["+model.backbone.attention=sliding_window", "+model.backbone.attention_window=600"],
         "model.backbone.attention_window=600 exceeds model.backbone.max_position_embeddings=512"),
        (["+model.backbone.attention=reformer"], "model.backbone.attention"),
        (["+model.backbone.attention=linformer", "+model.backbone.projected_length=0"], "model.backbone.projected_length"),
        (["+model.backbone.attention=linformer", "+model.backbone.projected_length=513"],
         "model.backbone.projected_length=513 exceeds"),
        (["+model.backbone.attention=longformer", "+model.backbone.global_tokens=[0,512]"],
         "model.backbone.global_tokens=[0, 512]: index 512 is outside"),
        (["+model.backbone.attention=bigbird", "+model.backbone.block_size=1024"], "model.backbone.block_size=1024 exceeds"),
    ],
    ids=["window", "unknown", "linformer_zero", "linformer_long", "global_outside", "block"],
)  # fmt: skip
def test_bad_settings_are_one_config_error_at_compose_time(overrides, needle):
    with pytest.raises(ConfigError) as raised:
        compose_config(["model=bert_tiny", *overrides])
    message = str(raised.value)
    assert needle in message and "\n" not in message, message


def test_a_decoder_takes_no_global_or_projected_attention():
    with pytest.raises(ConfigError, match="model.backbone.attention"):
        compose_config(["model=gpt_tiny", "objective=clm", "+model.backbone.attention=longformer"])
    with pytest.raises(ConfigError, match="model.backbone.attention='linformer' is not one of full, sliding_window"):
        _tiny(TransformerDecoder, attention="linformer")
    with pytest.raises(ConfigError, match="attention_window=64 exceeds model.backbone.max_position_embeddings=32"):
        _tiny(TransformerEncoder, attention="longformer", attention_window=64)


def test_a_window_longer_than_the_positions_exits_2_through_ptmlab_run(tmp_path):
    env = {**os.environ, "PTMLAB_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ptmlab.run",
            "+model.backbone.attention=sliding_window",
            "+model.backbone.attention_window=4096",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "model.backbone.attention_window=4096 exceeds" in lines[0], lines
    assert not (tmp_path / "home").exists()
