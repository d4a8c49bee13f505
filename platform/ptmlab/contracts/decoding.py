"""Decoding settings of `task.kind: generation` (`task.generation`, conf/task/seq2seq.yaml): one
declaration, read by the compose-time checks (ptmlab.contracts.task_checks) and turned here into
Hugging Face `generate()` arguments.

    strategy               greedy | beam | sample
    num_beams              beam: the beam size (>= 2; at most the vocabulary size)
    length_penalty         beam: score ÷ length**length_penalty (1.0: HF's default)
    no_repeat_ngram_size   0: off; n: no n-gram twice in an output
    max_new_tokens         the longest output, in sub-words (end token included)
    top_k, top_p, temperature, seed
                           sample: top-k / nucleus sampling, seeded (the same seed gives the same
                           outputs on the same device)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ptmlab.contracts.errors import ConfigError

STRATEGIES = ("greedy", "beam", "sample")


@dataclass(frozen=True)
class DecodingSettings:
    strategy: str = "greedy"
    num_beams: int = 4
    length_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    max_new_tokens: int = 64
    top_k: int = 50
    top_p: float = 1.0
    temperature: float = 1.0
    seed: int = 0

    @classmethod
    def from_dict(cls, node: dict | None) -> DecodingSettings:
        node = dict(node or {})
        unknown = set(node) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(
                f"task.generation.{sorted(unknown)[0]} is not a decoding setting; valid: "
                f"{', '.join(cls.__dataclass_fields__)}"
            )
        settings = cls(**node)
        settings.check()
        return settings

    def to_dict(self) -> dict:
        return asdict(self)

    def check(self, vocab_size: int | None = None) -> None:
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"task.generation.strategy={self.strategy} is unknown; valid: {', '.join(STRATEGIES)}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"task.generation.max_new_tokens={self.max_new_tokens} must be >= 1")
        if self.strategy == "beam" and self.num_beams < 2:
            raise ConfigError(
                f"task.generation.num_beams={self.num_beams}: beam search needs >= 2 beams (strategy=greedy for one)"
            )
        if self.strategy == "beam" and vocab_size is not None and self.num_beams > vocab_size:
            raise ConfigError(
                f"task.generation.num_beams={self.num_beams} is larger than the vocabulary ({vocab_size} tokens)"
            )
        if self.no_repeat_ngram_size < 0 or self.top_k < 0 or not 0.0 < self.top_p <= 1.0 or self.temperature <= 0:
            raise ConfigError(
                "task.generation: no_repeat_ngram_size and top_k must be >= 0, top_p in (0, 1], temperature > 0"
            )

    def generate_kwargs(self) -> dict:
        """`generate()` arguments (token ids are added by the caller)."""
        common = {"max_new_tokens": self.max_new_tokens, "no_repeat_ngram_size": self.no_repeat_ngram_size}
        if self.strategy == "greedy":
            return {**common, "do_sample": False, "num_beams": 1}
        if self.strategy == "beam":
            return {
                **common,
                "do_sample": False,
                "num_beams": self.num_beams,
                "length_penalty": self.length_penalty,
                "early_stopping": True,
            }
        return {
            **common,
            "do_sample": True,
            "num_beams": 1,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "temperature": self.temperature,
        }
