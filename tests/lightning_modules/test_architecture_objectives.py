"""Objectives tied to an architecture: bidirectional LM (ELMo biLSTM), permuted LM (XLNet
two-stream), replaced-token detection (ELECTRA pair), the encoder–decoder objectives (BART
denoising, T5 span corruption, MASS) and UniLM's mixed masks. Each builds the right targets
from its batch and overfits one batch with a tiny model; wrong families are refused at compose time."""

from __future__ import annotations

import random

import pytest
import torch

from lightning_modules.models.electra import ElectraPair
from lightning_modules.models.encoder_decoder import TransformerEncoderDecoder
from lightning_modules.models.lstm import BidirectionalLSTMLM
from lightning_modules.models.unilm import UnilmEncoder
from lightning_modules.models.xlnet import XLNetEncoder
from lightning_modules.objectives.bilm import BidirectionalLMObjective, previous_token_labels
from lightning_modules.objectives.dae import DenoisingAutoencoderObjective, full_stop_ids
from lightning_modules.objectives.mass import MassObjective
from lightning_modules.objectives.plm import PermutedLMObjective
from lightning_modules.objectives.rtd import ReplacedTokenDetectionObjective, sample_replacements
from lightning_modules.objectives.seq2seq import shift_right
from lightning_modules.objectives.span_corruption import SpanCorruptionObjective
from lightning_modules.objectives.unilm import UnifiedLMObjective, random_source_lengths
from ptmlab.config import compose_config
from ptmlab.errors import ConfigError

SUBJECTS = ["the cat", "a dog", "my neighbour", "the old farmer", "every child", "her brother"]
VERBS = ["watched", "followed", "painted", "remembered", "carried", "found"]
OBJECTS = ["the river", "a small boat", "the garden gate", "an apple tree", "the red kite"]


def refused_at_compose(objective: str, model: str, valid: str) -> None:
    """A wrong family is refused when the config is composed (the objective's
    `compatible_families`), naming the valid ones, before anything is built."""
    with pytest.raises(
        ConfigError,
        match=f"objective={objective} does not work with model family .*"
        f"valid families for objective={objective}: {valid}$",
    ):
        compose_config([f"objective={objective}", f"model={model}"])


def sentences(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}. then {rng.choice(SUBJECTS)} slept!"
        for _ in range(n)
    ]


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    from lightning_modules.data.tokenizer import EXTRA_SPECIALS

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *EXTRA_SPECIALS]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(sentences(300), trainers.WordPieceTrainer(vocab_size=150, special_tokens=specials))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        additional_special_tokens=EXTRA_SPECIALS,
    )


def batch_of(tokenizer, n: int = 8, seed: int = 1) -> dict[str, torch.Tensor]:
    enc = tokenizer(sentences(n, seed), padding=True, return_tensors="pt")
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}


def overfit(objective, backbone, batch, steps: int, lr: float = 3e-3) -> list[float]:
    backbone_ids = {id(p) for p in backbone.parameters()}
    params = list(backbone.parameters()) + [p for p in objective.parameters() if id(p) not in backbone_ids]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    losses = []
    for _ in range(steps):
        loss = objective(batch, backbone).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def tail(losses, n: int = 10) -> float:
    return sum(losses[-n:]) / n


def encoder_decoder(tokenizer, pre_layer_norm: bool = False) -> TransformerEncoderDecoder:
    torch.manual_seed(0)
    return TransformerEncoderDecoder(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
        dropout=0.0,
        attention_dropout=0.0,
        pre_layer_norm=pre_layer_norm,
    )


# -- ELMo --------------------------------------------------------------------------------------


def test_bidirectional_lm_labels_and_overfit(tokenizer):
    ids = torch.tensor([[5, 6, 7, 0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    assert previous_token_labels(ids, mask).tolist() == [[-100, 5, 6, -100]]
    torch.manual_seed(0)
    backbone = BidirectionalLSTMLM(
        vocab_size=len(tokenizer), embedding_size=32, hidden_size=64, projection_size=32, num_layers=2, dropout=0.0
    )
    objective = BidirectionalLMObjective(backbone, tokenizer)
    batch = batch_of(tokenizer)
    out = objective(batch, backbone)
    assert abs(out.loss.item() - 2 * torch.log(torch.tensor(float(len(tokenizer)))).item()) < 2.0  # two NLLs
    losses = overfit(objective, backbone, batch, 80, lr=1e-2)
    final = objective(batch, backbone)
    assert tail(losses) < 0.4 * losses[0], (losses[0], tail(losses))
    assert final.metrics["forward_loss"] > 0 and final.metrics["backward_loss"] > 0
    refused_at_compose("bilm", "bert_tiny", "lstm")


# -- XLNet -------------------------------------------------------------------------------------


def test_permuted_lm_predicts_last_part_of_order_and_overfits(tokenizer):
    torch.manual_seed(0)
    backbone = XLNetEncoder(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_layers=2,
        num_heads=2,
        intermediate_size=128,
        dropout=0.0,
        attention_dropout=0.0,
    )
    objective = PermutedLMObjective(backbone, tokenizer, partial_prediction_k=4, seed=0)
    batch = batch_of(tokenizer, n=8)
    m = objective.masks(batch)
    lengths = batch["attention_mask"].sum(1)
    assert torch.equal(m.target_mask.sum(1), torch.ceil(lengths / 4).long())
    assert not (m.target_mask & (batch["attention_mask"] == 0)).any()
    # 200 steps: the query stream knows its position only relative to its context (as in XLNet),
    # and every step samples new orders, so one batch takes longer to learn than with MLM.
    losses = overfit(objective, backbone, batch, 200, lr=5e-3)
    assert tail(losses) < 0.5 * losses[0], (losses[0], tail(losses))
    refused_at_compose("plm", "elmo_tiny", "permutation")
    with pytest.raises(ConfigError, match="partial_prediction_k"):
        PermutedLMObjective(backbone, tokenizer, partial_prediction_k=1)


# -- ELECTRA -----------------------------------------------------------------------------------


def test_sampled_replacements_follow_the_softmax():
    g = torch.Generator().manual_seed(0)
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1]])).repeat(60_000, 1)
    counts = torch.bincount(sample_replacements(logits, g), minlength=3).float() / 60_000
    assert torch.allclose(counts, torch.tensor([0.7, 0.2, 0.1]), atol=0.01)


def test_replaced_token_detection_trains_generator_and_discriminator(tokenizer):
    torch.manual_seed(0)
    backbone = ElectraPair(
        vocab_size=len(tokenizer),
        embedding_size=32,
        hidden_size=64,
        num_layers=1,
        num_heads=2,
        intermediate_size=128,
        generator_hidden_size=32,
        generator_num_layers=1,
        generator_num_heads=1,
        generator_intermediate_size=64,
        max_position_embeddings=64,
        dropout=0.0,
        attention_dropout=0.0,
    )
    objective = ReplacedTokenDetectionObjective(backbone, tokenizer, mask_prob=0.3, rtd_weight=50.0, seed=0)
    batch = {k: v.repeat(2, 1) for k, v in batch_of(tokenizer, n=8).items()}
    first = objective(batch, backbone)
    assert 0.0 < float(first.metrics["replaced_fraction"]) < 0.3  # replaced ⊂ masked; some sampled == original
    assert torch.isclose(first.loss, first.metrics["mlm_loss"] + 50.0 * first.metrics["rtd_loss"])
    first.loss.backward()
    assert backbone.generator.stack.layers[0].attention.query.weight.grad.abs().sum() > 0
    assert backbone.discriminator.stack.layers[0].attention.query.weight.grad.abs().sum() > 0
    backbone.zero_grad()
    objective.zero_grad()
    losses = overfit(objective, backbone, batch, 80, lr=3e-3)
    last = objective(batch, backbone)
    assert tail(losses) < 0.6 * losses[0], (losses[0], tail(losses))
    assert float(last.metrics["mlm_loss"]) < float(first.metrics["mlm_loss"])
    refused_at_compose("rtd", "bert_tiny", "electra")


# -- encoder–decoder -----------------------------------------------------------------------------


def test_shift_right():
    target = torch.tensor([[7, 8, 9], [7, 8, 0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    assert shift_right(target, mask, start_id=1, pad_id=0).tolist() == [[1, 7, 8], [1, 7, 8]]


@pytest.mark.parametrize(
    "noise",
    [
        {"text_infilling": 0.3, "sentence_permutation": True},
        {"token_masking": 0.3, "text_infilling": 0.0, "sentence_permutation": False},
        {"token_deletion": 0.3, "text_infilling": 0.0, "sentence_permutation": False},
        {"document_rotation": True, "text_infilling": 0.0, "sentence_permutation": False},
    ],
)
def test_denoising_autoencoder_reconstructs_the_original(tokenizer, noise):
    backbone = encoder_decoder(tokenizer)
    objective = DenoisingAutoencoderObjective(backbone, tokenizer, seed=0, **noise)
    assert full_stop_ids(tokenizer)  # "." and "!" found in the vocabulary
    batch = batch_of(tokenizer, n=8)
    source, source_mask, target, target_mask = objective.corrupt(batch)
    assert torch.equal(target[target_mask.bool()], batch["input_ids"][batch["attention_mask"].bool()])
    assert not torch.equal(source, batch["input_ids"])  # the input really is corrupted
    assert (source[:, 0] == tokenizer.cls_token_id).all()  # framing kept
    losses = overfit(objective, backbone, batch, 60, lr=5e-3)
    assert tail(losses) < 0.3 * losses[0], (losses[0], tail(losses))


def test_dae_refuses_no_noise_and_non_encoder_decoders(tokenizer):
    with pytest.raises(ConfigError, match="^objective.module: every noising function is off"):
        DenoisingAutoencoderObjective(
            encoder_decoder(tokenizer), tokenizer, text_infilling=0.0, sentence_permutation=False
        )
    with pytest.raises(ConfigError, match="token_deletion"):
        DenoisingAutoencoderObjective(encoder_decoder(tokenizer), tokenizer, token_deletion=2.0)
    refused_at_compose("dae", "bert_tiny", "encoder_decoder")


def test_t5_span_corruption_targets_are_sentinel_spans(tokenizer):
    backbone = encoder_decoder(tokenizer, pre_layer_norm=True)
    objective = SpanCorruptionObjective(backbone, tokenizer, noise_density=0.3, seed=0)
    batch = batch_of(tokenizer, n=8)
    source, source_mask, target, target_mask = objective.corrupt(batch)
    sentinel0 = tokenizer.convert_tokens_to_ids("<extra_id_0>")
    assert (target[:, 0] == sentinel0).all()
    for row in range(8):
        src = source[row][source_mask[row].bool()].tolist()
        tgt = target[row][target_mask[row].bool()].tolist()
        assert src[-1] == tgt[-1] == tokenizer.sep_token_id
        # Filling each sentinel of the source with its target span gives the original body back.
        spans, current = {}, None
        for t in tgt[:-1]:
            if t in objective.sentinels:
                current = t
                spans[current] = []
            else:
                spans[current].append(t)
        rebuilt = [t for s in src[:-1] for t in (spans[s] if s in objective.sentinels else [s])]
        original = batch["input_ids"][row][batch["attention_mask"][row].bool()].tolist()
        assert rebuilt == original[1:-1]
    losses = overfit(objective, backbone, batch, 60, lr=5e-3)
    assert tail(losses) < 0.3 * losses[0], (losses[0], tail(losses))


@pytest.mark.parametrize("objective_class", [SpanCorruptionObjective, DenoisingAutoencoderObjective, MassObjective])
def test_the_encoder_decoder_loss_on_an_accelerator_is_the_gathered_one(tokenizer, objective_class, monkeypatch):
    """On an accelerator the encoder–decoder objectives project every target position and weight
    the padded ones 0 (`predicted_token_loss`), instead of a boolean index the host must wait for:
    forced here on a CPU, the loss, its gradients, the accuracy and the count are the gathered path's."""
    import torch.nn.functional as F

    from lightning_modules.objectives import base

    linear = F.linear

    def step(gathered: bool):
        backbone = encoder_decoder(tokenizer, pre_layer_norm=objective_class is SpanCorruptionObjective)
        objective = objective_class(backbone, tokenizer, seed=0)
        table = backbone.get_input_embeddings().weight
        projected = []  # the rank of each input to the output layer (tied to the token table)

        def spy(x, weight, bias=None):
            if weight is table:
                projected.append(x.dim())
            return linear(x, weight, bias)

        with monkeypatch.context() as patch:
            patch.setattr(base, "gathers_predicted_positions", lambda device: gathered)
            patch.setattr(F, "linear", spy)
            out = objective(batch_of(tokenizer, n=8), backbone)
        out.loss.backward()
        # gathered: N×H rows; on an accelerator: the whole B×T×H decoder output
        assert projected == ([2] if gathered else [3]), projected
        return out, [p.grad for p in backbone.parameters() if p.grad is not None]

    gathered, gathered_grads = step(True)
    everywhere, everywhere_grads = step(False)
    torch.testing.assert_close(everywhere.loss, gathered.loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(everywhere.metrics, gathered.metrics)
    assert int(everywhere.num_predicted_tokens) == int(gathered.num_predicted_tokens) > 8
    assert len(everywhere_grads) == len(gathered_grads)
    for a, b in zip(everywhere_grads, gathered_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_mass_predicts_the_masked_fragment(tokenizer):
    backbone = encoder_decoder(tokenizer)
    objective = MassObjective(backbone, tokenizer, seed=0)
    batch = batch_of(tokenizer, n=8)
    source, source_mask, target, target_mask = objective.corrupt(batch)
    for row in range(8):
        original = batch["input_ids"][row][batch["attention_mask"][row].bool()]
        src = source[row][source_mask[row].bool()]
        fragment = target[row][target_mask[row].bool()]
        masked = (src == tokenizer.mask_token_id).nonzero().flatten()
        assert masked.numel() == fragment.numel() == round(0.5 * (original.numel() - 2))
        assert torch.equal(original[masked], fragment)
        assert (masked.diff() == 1).all()  # one contiguous fragment
    losses = overfit(objective, backbone, batch, 60, lr=5e-3)
    assert tail(losses) < 0.3 * losses[0], (losses[0], tail(losses))


# -- UniLM -------------------------------------------------------------------------------------


def test_unilm_samples_modes_and_overfits(tokenizer):
    torch.manual_seed(0)
    backbone = UnilmEncoder(
        vocab_size=len(tokenizer),
        hidden_size=64,
        num_layers=2,
        num_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
        dropout=0.0,
        attention_dropout=0.0,
    )
    objective = UnifiedLMObjective(backbone, tokenizer, seed=0)
    g = torch.Generator().manual_seed(0)
    modes = [objective.sample_mode(g) for _ in range(6000)]
    assert abs(modes.count("bidirectional") / 6000 - 1 / 3) < 0.02
    assert abs(modes.count("right_to_left") / 6000 - 1 / 6) < 0.02
    split = random_source_lengths(torch.ones(5000, 10, dtype=torch.long), g)
    assert split.min() == 1 and split.max() == 9
    batch = {k: v.repeat(2, 1) for k, v in batch_of(tokenizer, n=8).items()}
    losses = overfit(objective, backbone, batch, 100, lr=5e-3)
    assert tail(losses, 20) < 0.4 * losses[0], (losses[0], tail(losses, 20))
    # Seq2seq mode masks only target tokens.
    only = UnifiedLMObjective(backbone, tokenizer, mode_weights={"seq2seq": 1.0}, seed=0)
    assert only(batch, backbone).metrics.keys() >= {"seq2seq_loss"}
    with pytest.raises(ConfigError, match="mode_weights"):
        UnifiedLMObjective(backbone, tokenizer, mode_weights={"sideways": 1.0})
    refused_at_compose("unilm", "gpt_tiny", "encoder")
