"""Activation extraction with a cache: every layer's word-level hidden states (embedding layer
first) of a list of sentences, stored as fp16 shards that every probe of every job reuses.

Layout: `<cache_dir>/activations/<key>/` where key = sha256(model hash, data hash, alignment,
max length)[:24]:

    manifest.json        torch-free index (`ptmlab cache` reads it): model, data, alignment,
                         layers, hidden size, shards done, sizes, complete, created/last used
    shard_00000.safetensors   states: (L+1) × words × H fp16; lengths: words per sentence
    ...

Resumable after a kill: shards are written one by one (temporary file, then an atomic rename), so
a shard file on disk is always whole; a resumed extraction starts at the first shard missing.
Deterministic: a shard's batches depend only on its own sentences, so a resumed extraction
gives the same activations as an uninterrupted one.

Subword → word alignment (`first`, `last` or `mean` subword) is part of the key and recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from ptmlab.contracts import ConfigError, DataError
from ptmlab.contracts.file_lock import exclusive

ALIGNMENTS = ("first", "last", "mean")
MANIFEST = "manifest.json"
FORMAT_VERSION = 1

# Forward passes this process ran for extraction (a test asserts a cache hit runs none).
FORWARD_PASSES = {"count": 0}


def model_hash(backbone: torch.nn.Module, tokenizer) -> str:
    """sha256 over the architecture's class, every parameter/buffer (name, shape, bytes) and the
    tokenizer's vocabulary: two jobs with the same weights and tokenizer share activations."""
    h = hashlib.sha256()
    h.update(f"{type(backbone).__module__}.{type(backbone).__qualname__}".encode())
    for name, tensor in sorted(backbone.state_dict().items()):
        t = tensor.detach().contiguous().cpu()
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(str(t.dtype).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    vocab = tokenizer.get_vocab()
    h.update(json.dumps(sorted(vocab.items(), key=lambda kv: kv[1])).encode())
    return h.hexdigest()


def data_hash(sentences: list[list[str]]) -> str:
    """sha256 of the exact word lists extracted (file, sentence limit and any perturbation included)."""
    h = hashlib.sha256()
    for words in sentences:
        h.update("\x1f".join(words).encode())
        h.update(b"\x1e")
    return h.hexdigest()


@dataclass
class Activations:
    """Word-level states of a dataset: `states[l]` is words × H (fp16) for layer l (0 = embeddings);
    sentence i's words are rows offsets[i]:offsets[i+1]."""

    states: torch.Tensor  # (L+1) × N_words × H, fp16
    lengths: torch.Tensor  # n_sentences, words per sentence
    key: str
    forward_passes: int  # 0 when every shard came from the cache
    cache_hit: bool

    @property
    def offsets(self) -> torch.Tensor:
        return torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(self.lengths.long(), 0)])

    @property
    def num_layers(self) -> int:
        return self.states.shape[0]

    def layer(self, index: int) -> torch.Tensor:
        """words × H float32 of one layer."""
        return self.states[index].float()


def tokenized_max_length(backbone) -> int:
    model_cfg = getattr(backbone, "config", None)
    limit = getattr(model_cfg, "max_position_embeddings", None) if model_cfg is not None else None
    if limit is None:
        emb = getattr(getattr(backbone, "embeddings", None), "position_embeddings", None)
        limit = emb.num_embeddings if emb is not None else 512
    return int(limit)


def encode_words(tokenizer, sentences: list[list[str]], max_length: int) -> list[dict]:
    """Per sentence: input_ids and the subword positions of each word. A sentence whose subwords
    do not fit in `max_length` raises DataError (a probe dataset is chosen to fit the model)."""
    encoded = tokenizer(sentences, is_split_into_words=True, add_special_tokens=True, truncation=False)
    out = []
    for i, words in enumerate(sentences):
        ids = encoded["input_ids"][i]
        word_ids = encoded.word_ids(i)
        if len(ids) > max_length:
            raise DataError(
                f"sentence {i} ({len(words)} words) is {len(ids)} subwords long, beyond the model's "
                f"{max_length} positions: lower probe.data.max_sentence_words"
            )
        positions: list[list[int]] = [[] for _ in words]
        for pos, w in enumerate(word_ids):
            if w is not None:
                positions[w].append(pos)
        for w in range(len(words)):  # a word the tokenizer drops entirely reads the token before it
            if not positions[w]:
                positions[w] = [positions[w - 1][-1]] if w > 0 else [0]
        out.append({"input_ids": ids, "positions": positions})
    return out


def word_sources(
    encoded: list[dict], alignment: str, tokens_per_row: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Where each word of a batch reads its state, in the batch flattened to (B·T) token rows:
    the token rows, the word (0..words-1, sentence by sentence) each row feeds and its weight
    (1 for first/last, 1/subwords for mean). Indices instead of a B × W × T weight matrix: the
    states are gathered, not multiplied out."""
    rows: list[int] = []
    words: list[int] = []
    weights: list[float] = []
    word = 0
    for b, e in enumerate(encoded):
        base = b * tokens_per_row
        for pos in e["positions"]:
            chosen = pos[:1] if alignment == "first" else pos[-1:] if alignment == "last" else pos
            rows.extend(base + p for p in chosen)
            words.extend([word] * len(chosen))
            weights.extend([1.0 / len(chosen)] * len(chosen))
            word += 1
    return torch.tensor(rows), torch.tensor(words), torch.tensor(weights)


def batches_of(encoded: list[dict], batch_size: int) -> list[list[int]]:
    """Indices grouped by length (less padding); deterministic given the shard's sentences."""
    order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i]["input_ids"]), i))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def pad_batch(encoded: list[dict], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    longest = max(len(e["input_ids"]) for e in encoded)
    ids = torch.full((len(encoded), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), longest), dtype=torch.long)
    for b, e in enumerate(encoded):
        ids[b, : len(e["input_ids"])] = torch.tensor(e["input_ids"])
        mask[b, : len(e["input_ids"])] = 1
    return ids, mask


@dataclass
class PreparedBatch:
    """One forward pass of a shard, built before it runs: the padded inputs, the (B·T) token row
    each chosen subword reads with the batch word it feeds and its weight, and where the batch's
    words start in the shard's batch order."""

    ids: torch.Tensor  # B × T
    mask: torch.Tensor  # B × T
    sources: torch.Tensor  # chosen subwords
    words: torch.Tensor  # chosen subwords: batch word 0..W-1
    weights: torch.Tensor  # chosen subwords: 1, or 1/subwords for mean
    first: int  # the batch's word 0 in the shard's batch order
    n_words: int  # W


@dataclass
class PreparedShard:
    """One shard tokenised, aligned and padded: its batches (sorted by length), and its words in
    sentence order, each one's row in batch order."""

    batches: list[PreparedBatch]
    order: torch.Tensor  # shard words


def prepare_shard(
    tokenizer, chunk: list[list[str]], alignment: str, batch_size: int, pad_id: int, max_length: int
) -> PreparedShard:
    """Runs a shard ahead of the forward passes: in a thread beside them where a core is free (the
    tokenizer releases the GIL; `side_executor`), else just before them."""
    encoded = encode_words(tokenizer, chunk, max_length)
    starts = torch.cumsum(torch.tensor([0, *(len(s) for s in chunk)]), 0).tolist()  # first word of each sentence
    batches, sentence_order = [], []
    for batch in batches_of(encoded, batch_size):
        members = [encoded[i] for i in batch]
        ids, mask = pad_batch(members, pad_id)
        sources, words, weights = word_sources(members, alignment, ids.shape[1])
        n_words = sum(len(e["positions"]) for e in members)
        batches.append(PreparedBatch(ids, mask, sources, words, weights, len(sentence_order), n_words))
        sentence_order.extend(w for i in batch for w in range(starts[i], starts[i + 1]))
    order = torch.empty(len(sentence_order), dtype=torch.long)
    order[torch.tensor(sentence_order)] = torch.arange(len(sentence_order))  # inverse of batch order
    return PreparedShard(batches, order)


class PreparedInputs:
    """What extraction needs of the sentences besides the model: each shard tokenised, aligned and
    batched (`prepare_shard`), once, on first use. The same for every model that shares the
    tokenizer and the settings, so a probe job tokenises its data once for the model and its
    random-init twin; a shard that the cache already holds is never prepared."""

    def __init__(
        self,
        tokenizer,
        sentences: list[list[str]],
        *,
        alignment: str,
        batch_size: int,
        shard_sentences: int,
        max_length: int,
    ):
        self.tokenizer, self.sentences = tokenizer, sentences
        self.settings = (alignment, batch_size, shard_sentences, max_length)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.shards: dict[int, PreparedShard] = {}

    def fits(self, tokenizer, sentences: list[list[str]], settings: tuple) -> bool:
        return (
            tokenizer is self.tokenizer
            and settings == self.settings
            and (sentences is self.sentences or sentences == self.sentences)
        )

    def shard(self, index: int) -> PreparedShard:
        if index not in self.shards:
            alignment, batch_size, shard_sentences, max_length = self.settings
            chunk = self.sentences[index * shard_sentences : (index + 1) * shard_sentences]
            self.shards[index] = prepare_shard(self.tokenizer, chunk, alignment, batch_size, self.pad_id, max_length)
        return self.shards[index]


@torch.inference_mode()  # no autograd bookkeeping at all: the states are only stored (about 2 % faster than no_grad)
def word_states(backbone, batch: PreparedBatch, alignment: str) -> list[torch.Tensor]:
    """One forward pass over a batch → per layer (embeddings first) words × H float32, the batch's
    sentences in order."""
    out = backbone(batch.ids, attention_mask=batch.mask)
    FORWARD_PASSES["count"] += 1
    layers = []
    for hidden in out.hidden_states:  # each B × T × H
        flat = hidden.reshape(-1, hidden.shape[-1])  # (B·T) × H
        picked = flat.index_select(0, batch.sources)  # chosen subwords × H
        if alignment == "mean":
            picked = torch.zeros(batch.n_words, flat.shape[1], dtype=flat.dtype).index_add_(
                0, batch.words, picked * batch.weights.to(flat.dtype)[:, None]
            )
        layers.append(picked)
    return layers


class WordStateRows:
    """The extraction's output, (L+1) × all words × H fp16 in sentence order, and a staging area
    one shard fills in batch order; allocated at the first forward pass, where L and H are known."""

    def __init__(self, total_words: int, shard_words: int):
        self.total_words, self.shard_words = total_words, shard_words
        self.states: torch.Tensor | None = None
        self.staging: torch.Tensor | None = None

    def allocate(self, num_layers: int, hidden_size: int) -> None:
        self.states = torch.empty(num_layers, self.total_words, hidden_size, dtype=torch.float16)
        self.staging = torch.empty(num_layers, self.shard_words, hidden_size, dtype=torch.float16)

    def fill(self, backbone, shard: PreparedShard, alignment: str, rows: slice) -> None:
        """Run one shard's batches; its words land in `states[:, rows]`."""
        for batch in shard.batches:
            layers = word_states(backbone, batch, alignment)  # each batch words × H
            if self.states is None:
                self.allocate(len(layers), layers[0].shape[1])
            for layer, words in enumerate(layers):
                self.staging[layer, batch.first : batch.first + batch.n_words].copy_(words)  # fp32 → fp16
        n = len(shard.order)
        for layer in range(self.states.shape[0]):
            # one gather per layer puts the shard back in sentence order: a per-batch index_copy_
            # into fp16 rows costs several times more on CPU
            torch.index_select(self.staging[layer, :n], 0, shard.order, out=self.states[layer, rows])


class ActivationCache:
    """The platform's activation cache folder (`cfg.paths.cache_dir`/activations)."""

    def __init__(self, cache_dir: str | Path):
        self.root = Path(cache_dir) / "activations"

    def entry(self, key: str) -> Path:
        return self.root / key

    @contextmanager
    def locked(self, key: str):
        """One extractor per entry at a time (two jobs asking for the same thing: the second waits
        and then reads what the first wrote)."""
        folder = self.entry(key)
        folder.mkdir(parents=True, exist_ok=True)
        with exclusive(folder / ".lock"):
            yield folder


def write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def write_shard(folder: Path, path: Path, states: torch.Tensor, lengths: torch.Tensor, manifest: dict) -> None:
    """Write one shard (temporary file, then an atomic rename) and bring the index up to date.
    `states` is the shard's slice of the extraction's output, (L+1) × words × H: packed here, in
    the writer thread, not in the one running forward passes."""
    from safetensors.torch import save_file

    tmp = folder / f".{path.name}.{os.getpid()}.tmp"
    save_file({"states": states.contiguous(), "lengths": lengths}, str(tmp))
    os.replace(tmp, path)
    # The index follows shard by shard, so `ptmlab cache list` shows a partial entry's size.
    done = sorted(folder.glob("shard_*.safetensors"))
    manifest.update(shards_done=len(done), size_bytes=sum(p.stat().st_size for p in done), last_used=time.time())
    write_json_atomic(folder / MANIFEST, manifest)


class InlineExecutor:
    """The `submit` of an executor, run in the calling thread: the side work of extraction where no
    core is free for a thread of its own."""

    def submit(self, fn, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # kept for `result()`, as a thread's would be
            future.set_exception(error)
        return future

    def __enter__(self) -> InlineExecutor:
        return self

    def __exit__(self, *exc) -> None:
        return None


def side_executor(name: str) -> ThreadPoolExecutor | InlineExecutor:
    """A thread for tokenising or writing beside the forward passes only where torch leaves a core
    free: where its intra-op threads take every core, a second thread descheduling one of them
    stalls each parallel region (bench/probing.py, two threads on two cores: extraction ÷ bare
    forward 0.838 with the side threads, 0.897-0.925 inline at load 1-2 and 0.963-0.965 inline on
    an idle machine; 0.963 with torch on one thread and the side threads)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if torch.get_num_threads() >= cores:
        return InlineExecutor()
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)


def wait_for_shard(written: Future, shard: int, n_shards: int, progress) -> None:
    written.result()  # re-raises a failed write (a full disk) in the extracting thread
    if progress is not None:
        progress(shard + 1, n_shards)


def extract(
    backbone,
    tokenizer,
    sentences: list[list[str]],
    *,
    cache_dir: str | Path,
    alignment: str = "first",
    batch_size: int = 32,
    shard_sentences: int = 256,
    model_label: str = "",
    model_digest: str | None = None,
    data_label: str = "",
    progress=None,
    inputs: PreparedInputs | None = None,
) -> Activations:
    """Every layer's word states of `sentences`, from the cache where present (see module doc).
    `inputs`: the sentences prepared for an earlier model with the same tokenizer and settings
    (`PreparedInputs`), reused instead of tokenising again."""
    from safetensors.torch import load_file

    if alignment not in ALIGNMENTS:
        raise ConfigError(f"stage.alignment={alignment!r}: expected one of {', '.join(ALIGNMENTS)}")
    if not sentences:
        raise DataError(f"no sentences to extract ({data_label or 'empty dataset'})")
    max_length = tokenized_max_length(backbone)
    digest = model_digest or model_hash(backbone, tokenizer)
    dhash = data_hash(sentences)
    key = hashlib.sha256(json.dumps([FORMAT_VERSION, digest, dhash, alignment, shard_sentences]).encode()).hexdigest()[
        :24
    ]
    cache = ActivationCache(cache_dir)
    n_shards = (len(sentences) + shard_sentences - 1) // shard_sentences
    lengths = torch.tensor([len(s) for s in sentences], dtype=torch.int32)
    sentence_rows = torch.cumsum(torch.cat([torch.zeros(1, dtype=torch.long), lengths.long()]), 0)  # n_sentences + 1
    shard_rows = [int(sentence_rows[min(i * shard_sentences, len(sentences))]) for i in range(n_shards + 1)]
    passes_before = FORWARD_PASSES["count"]
    settings = (alignment, batch_size, shard_sentences, max_length)
    if inputs is None or not inputs.fits(tokenizer, sentences, settings):
        inputs = PreparedInputs(
            tokenizer,
            sentences,
            alignment=alignment,
            batch_size=batch_size,
            shard_sentences=shard_sentences,
            max_length=max_length,
        )
    with cache.locked(key) as folder:
        # a shard being written when a job was killed (ours, or safetensors' own temporary file)
        for torn in [*folder.glob(".*.tmp"), *folder.glob(".tmp*")]:
            torn.unlink(missing_ok=True)
        manifest_path = folder / MANIFEST
        manifest = (
            json.loads(manifest_path.read_text())
            if manifest_path.exists()
            else {
                "format_version": FORMAT_VERSION,
                "key": key,
                "model": model_label,
                "model_hash": digest,
                "data": data_label,
                "data_hash": dhash,
                "alignment": alignment,
                "sentences": len(sentences),
                "words": int(lengths.sum()),
                "shard_sentences": shard_sentences,
                "shards": n_shards,
                "created": time.time(),
                "complete": False,
            }
        )
        was_complete = bool(manifest.get("complete"))
        backbone.eval()
        shard_files = [folder / f"shard_{i:05d}.safetensors" for i in range(n_shards)]
        missing = [i for i, path in enumerate(shard_files) if not path.exists()]
        output = WordStateRows(shard_rows[-1], max(b - a for a, b in zip(shard_rows, shard_rows[1:])))
        # Two threads beside the forward passes where a core is free (side_executor): one tokenises
        # and aligns shard i+1 while shard i runs (the tokenizer releases the GIL), one writes i-1.
        # safetensors 0.8's save_file holds the GIL through its disk write, which stalls the forward
        # thread briefly; writing its bytes from Python instead, layer by layer without the copy,
        # measured no faster (bench/probing.py prepared 0.940-0.957 against 0.963-0.965, idle
        # machine). Shards still land in order, each whole; every word's state goes straight into
        # its row of the output.
        with side_executor("shard-preparer") as preparer, side_executor("shard-writer") as writer:

            def prepare(shard: int) -> Future:
                return preparer.submit(inputs.shard, shard)

            upcoming = prepare(missing[0]) if missing else None
            pending: tuple[Future, int] | None = None
            for n, shard in enumerate(missing):
                prepared = upcoming.result()
                upcoming = prepare(missing[n + 1]) if n + 1 < len(missing) else None
                rows = slice(shard_rows[shard], shard_rows[shard + 1])
                output.fill(backbone, prepared, alignment, rows)
                if pending is not None:
                    wait_for_shard(*pending, n_shards, progress)
                shard_lengths = lengths[shard * shard_sentences : (shard + 1) * shard_sentences].clone()
                pending = (
                    writer.submit(
                        write_shard, folder, shard_files[shard], output.states[:, rows], shard_lengths, manifest
                    ),
                    shard,
                )
            if pending is not None:
                wait_for_shard(*pending, n_shards, progress)
        for shard in sorted(set(range(n_shards)) - set(missing)):  # written by an earlier job
            stored = load_file(str(shard_files[shard]))["states"]
            if output.states is None:
                output.states = torch.empty(stored.shape[0], shard_rows[-1], stored.shape[2], dtype=stored.dtype)
            output.states[:, shard_rows[shard] : shard_rows[shard + 1]].copy_(stored)
        states = output.states
        manifest.update(
            {
                "complete": True,
                "shards_done": n_shards,
                "num_layers": int(states.shape[0]),
                "hidden_size": int(states.shape[2]),
                "size_bytes": sum(p.stat().st_size for p in shard_files),
                "last_used": time.time(),
            }
        )
        write_json_atomic(folder / MANIFEST, manifest)
    passes = FORWARD_PASSES["count"] - passes_before
    return Activations(states, lengths, key, passes, cache_hit=was_complete and passes == 0)
