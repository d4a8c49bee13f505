"""Low-rank factorisation of Linear layers by truncated SVD: W (out×in) ≈ B (out×r) · A (r×in)
(artifacts/structural_edits.py LowRankLinear), for every encoder Linear (`scope=encoder`) at one
`rank`, an `energy` share of the squared singular values kept per matrix, or a `param_ratio`
(each matrix keeps r = ⌊ratio·in·out/(in+out)⌋, so the factored layers hold that share of the
parameters); then `finetune_epochs` of recovery."""

from __future__ import annotations

import torch

from lightning_modules.artifacts.structural_edits import factorize
from lightning_modules.compression.base import CompressContext, Compressed, CompressionMethod, copy_model, train_epochs
from lightning_modules.compression.prune_magnitude import prunable_linears
from lightning_modules.compression.quantize_dynamic import refuse_quantized_source
from ptmlab.contracts import ConfigError
from ptmlab.methods.compression import LowRankParams


class LowRank(CompressionMethod):
    declaration = LowRankParams
    params: LowRankParams  # the validated declaration (CompressionMethod.__init__)

    name = "low_rank"

    def ranks(self, model) -> dict[str, int]:
        out = {}
        for name, m in prunable_linears(model, self.params.scope):
            full = min(m.in_features, m.out_features)
            if self.params.rank is not None:
                if self.params.rank > full:
                    raise ConfigError(
                        f"compression.rank={self.params.rank} is larger than the matrix {name} "
                        f"({m.out_features}×{m.in_features}, rank at most {full})"
                    )
                r = self.params.rank
            elif self.params.energy is not None:
                s = torch.linalg.svdvals(m.weight.detach().float())
                share = (s**2).cumsum(0) / (s**2).sum()
                r = int((share < self.params.energy).sum()) + 1
            elif self.params.param_ratio is not None:
                r = int(self.params.param_ratio * m.in_features * m.out_features / (m.in_features + m.out_features))
            else:
                raise ConfigError(
                    "compression.rank, compression.energy and compression.param_ratio are all null: set one"
                )
            out[name] = max(1, min(r, full))
        return out

    def check(self, source, ctx: CompressContext) -> None:

        refuse_quantized_source(source, self.name)
        if not prunable_linears(source.model, self.params.scope):
            raise ConfigError(f"compression.scope={self.params.scope}: no Linear layer to factorise")
        self.ranks(source.model)

    def compress(self, source, ctx: CompressContext) -> Compressed:
        model = copy_model(source)
        ranks = self.ranks(model)
        before = sum(model.get_submodule(n).weight.numel() for n in ranks)
        factorize(model, ranks, from_weights=True)
        after = sum(
            p.numel() for n in ranks for k, p in model.get_submodule(n).named_parameters() if k.endswith("weight")
        )
        trained = train_epochs(model, source.tokenizer, ctx, epochs=self.params.finetune_epochs, lr=self.params.lr)
        numbers = {
            "factored_layers": len(ranks),
            "factored_weight_ratio": round(after / before, 6),
            "ranks": sorted(set(ranks.values())),
            "recovery_steps": trained["steps"],
            "train_time_s": trained["train_time_s"],
        }
        return Compressed(model, [{"op": "low_rank", "ranks": ranks}], numbers, training=[trained])
