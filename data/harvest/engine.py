"""Harvest genuine speculative-decoding traces from local causal language models (issue 6).

``python generate_data.py harvest --target PATH (--draft PATH | --draft-skip-layers LIST |
--draft-window SINK,RECENT) --prompts FILE`` runs real speculative sampling (Leviathan et al.
2023, arXiv 2211.17192; Chen et al. 2023, arXiv 2302.01318) with a local target model and a
drafter, and writes one schema-v1 record (:mod:`data.schema`) for every drafted token.

Models
------
``PATH`` is a local Hugging Face model directory (``config.json``, safetensors or
``pytorch_model*.bin`` weights, tokenizer files) or a local ``.gguf`` file, loaded through
transformers' GGUF support (``gguf_file=``; weights are dequantised). Offline mode is forced
(``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``, ``local_files_only=True``) and only
existing local paths are accepted, so nothing is ever fetched from a hub.

Drafters
--------
* ``model``: a second model that shares the target's tokenizer (same vocabulary, id for id),
  with its own KV cache.
* ``skip_layers``: self-speculation by skipping the listed decoder layers of the target
  (Draft & Verify, Zhang et al. 2024, arXiv 2309.08168). The drafter is a shallow copy of the
  target whose ``model.layers`` holds only the kept layers (the weights are shared, nothing is
  copied); it reads and extends the target's own KV cache, as the paper's implementation does,
  and the cache is cropped back before verification. Llama-like models (decoder layers in
  ``model.model.layers``) only.
* ``window``: self-speculation with attention restricted to the first ``SINK`` tokens plus the
  ``RECENT`` most recent tokens (StreamingLLM-style sparse KV, as in TriForce, Sun et al. 2024,
  arXiv 2404.11912, and MagicDec, Chen et al. 2024, arXiv 2408.11049). The draft passes run
  the target on its own KV cache with a 4-D attention mask that hides every other position;
  the rows of the verified prefix were computed by the full target. The mask gives the exact
  drafter distribution; it does not make drafting faster here (only the records matter).

One block (:meth:`SpeculativeEngine.block`)
-------------------------------------------
The drafter proposes ``k <= gamma`` tokens autoregressively, each sampled from its own
distribution q given the context and its earlier drafts (drafting stops early at an
end-of-sequence token). The target scores the context plus all drafts in one pass, giving p at
every depth and the bonus distribution. Each depth i gets a fresh u_i ~ U[0, 1) (``rand_value``);
the standard rule accepts while u_i < min(1, p_i(x_i)/q_i(x_i)); at the first rejection j the
next token is sampled from the residual norm(max(0, p_j - q_j)), after k acceptances from the
bonus distribution p_{k+1}. So the emitted text is distributed exactly as the target's.
One record is written for every drafted token, including those after the first rejection
(other rules may accept them); ``baseline_accepts`` is the standard rule's outcome on the
record's own ``rand_value``, exactly as :func:`data.schema.validate` checks it.

Distributions are softmax(logits / T) computed in float64 over the first ``V`` logits, where
``V`` is the smaller of the two models' output sizes (ids past it can never be drafted or
sampled; the tokenizers must agree below it and prompts must encode below it); T = 0 means
greedy decoding (one-hot at the arg max, lowest id on ties). Entropies are in nats.

Models whose layers keep a recurrent state (linear attention, Mamba-style hybrids) are refused:
their cache cannot be rolled back after a rejected draft.

Random numbers, per text, from ``numpy.random.default_rng([seed, text_index])`` in a fixed
order per block: k draft-sampling uniforms, k acceptance uniforms, one uniform for the
residual or bonus token. Sampling is by inverse CDF on the float64 distribution. A text's
records therefore depend only on (models, options, seed, text index), which is what makes a
resumed run identical to an uninterrupted one (given the same torch build, device and thread
count, since the logits come from torch).

Columns: ``seq_id`` = text index (0-based, among the non-blank lines of the prompts file),
``position`` = index in the generated continuation of the token being drafted (the positions
of the records after a rejection repeat in the next block, as they should), ``draft_index``
= depth 0..k-1.

Splits and files
----------------
Splits are by prompt, never within a text: the prompts are shuffled with
``numpy.random.default_rng(seed).permutation(n)``; the first ``max(1, round(0.1 n))`` go to
valid, the next as many to test, the rest to train (at least 3 prompts are required, so every
split gets one). Texts are processed in an order that interleaves the splits in proportion,
so an interrupted harvest still has every split. Each finished text is written at once to
``OUT/.harvest/parts/text-NNNNNN.parquet`` (atomically; its existence marks the text done) and
``OUT/.harvest/manifest.json`` holds the settings it must be resumed with. On completion or
Ctrl-C the parts are consolidated into ``train/valid/test.parquet``, ``texts.jsonl`` (prompt and
completion of every text) and ``metadata.json`` with :func:`data.io.write_dataset`. Running the
same command again resumes: finished texts are kept, the interrupted one is redone from its own
seed, and different settings are refused.
"""
from __future__ import annotations

import copy
import hashlib
import io
import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from data.errors import InputError
from data.io import METADATA_FILE, SPLITS, Traces, atomic_write_bytes, atomic_write_text, load_metadata, write_dataset
from data.synth.generate import check_output_dir
from data.schema import COLUMNS, split_stats

GENERATOR = "harvest"
GENERATOR_VERSION = 1
WORK_DIR = ".harvest"
MANIFEST_FILE = "manifest.json"
TEXTS_FILE = "texts.jsonl"
DTYPES = ("float32", "bfloat16", "float16")
#: Fraction of the prompts in each of valid and test (at least one prompt each).
HELD_OUT_FRACTION = 0.1
_SMALL_MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                      "tokenizer.model", "special_tokens_map.json", "vocab.json", "merges.txt",
                      "added_tokens.json", "chat_template.jinja", "chat_template.json")
_COLUMN_ORDER = [c.name for c in COLUMNS]


# ----------------------------------------------------------------------------- options

@dataclass(frozen=True)
class HarvestConfig:
    """Everything a harvest depends on (the CLI options).

    Exactly one drafter: ``draft`` (path of a second model), ``skip_layers`` (0-based decoder
    layer indices of the target to skip) or ``window`` ((sink, recent) token counts).
    ``temperature`` 0 means greedy decoding. ``dtype`` is the torch dtype the models run in,
    ``threads`` the torch CPU thread count (None: torch's default).
    """

    target: str
    prompts: str
    draft: str | None = None
    skip_layers: tuple[int, ...] | None = None
    window: tuple[int, int] | None = None
    gamma: int = 5
    max_new_tokens: int = 128
    temperature: float = 1.0
    seed: int = 0
    out: str = "data/harvest"
    dtype: str = "float32"
    device: str = "cpu"
    threads: int | None = None

    @property
    def drafter_kind(self) -> str:
        """``model``, ``skip_layers`` or ``window``."""
        return "model" if self.draft is not None else "skip_layers" if self.skip_layers is not None else "window"

    def check(self) -> None:
        """Validate option values (not the files). Raises InputError naming the option."""
        chosen = [name for name, v in (("--draft", self.draft), ("--draft-skip-layers", self.skip_layers),
                                       ("--draft-window", self.window)) if v is not None]
        if len(chosen) != 1:
            what = "none was given" if not chosen else f"got {' and '.join(chosen)}"
            raise InputError(f"options '--draft', '--draft-skip-layers', '--draft-window': "
                             f"choose exactly one drafter ({what})")
        if self.gamma < 1:
            raise InputError(f"option '--gamma': must be at least 1 (value {self.gamma})")
        if self.max_new_tokens < 2:
            raise InputError(f"option '--max-new-tokens': must be at least 2 so that a block is drafted "
                             f"(value {self.max_new_tokens})")
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise InputError(f"option '--temperature': must be a finite number >= 0 (value {self.temperature})")
        if self.seed < 0:
            raise InputError(f"option '--seed': must be >= 0 (value {self.seed})")
        if self.threads is not None and self.threads < 1:
            raise InputError(f"option '--threads': must be at least 1 (value {self.threads})")
        if self.dtype not in DTYPES:
            raise InputError(f"option '--dtype': unknown dtype '{self.dtype}' (choose from {', '.join(DTYPES)})")
        if self.skip_layers is not None:
            if not self.skip_layers:
                raise InputError("option '--draft-skip-layers': the list is empty")
            if any(i < 0 for i in self.skip_layers):
                raise InputError(f"option '--draft-skip-layers': layer indices are >= 0 (value {min(self.skip_layers)})")
        if self.window is not None:
            sink, recent = self.window
            if sink < 0 or recent < 1:
                raise InputError(f"option '--draft-window': SINK must be >= 0 and RECENT >= 1 "
                                 f"(value {sink},{recent})")


def parse_layer_list(text: str, option: str = "--draft-skip-layers") -> tuple[int, ...]:
    """Parse ``"1,3,5-7"`` into sorted unique 0-based layer indices ``(1, 3, 5, 6, 7)``.

    Raises: InputError naming ``option`` and the bad item.
    """
    out: set[int] = set()
    items = [s.strip() for s in text.split(",")]
    if not any(items):
        raise InputError(f"option '{option}': the list is empty (value {text!r})")
    for item in items:
        try:
            if "-" in item[1:]:
                lo, hi = item.split("-", 1) if not item.startswith("-") else (item, "")
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                out.update(range(a, b + 1))
            else:
                out.add(int(item))
        except ValueError:
            raise InputError(f"option '{option}': '{item}' is not a layer index or a range A-B "
                             f"(value {text!r})") from None
    if min(out) < 0:
        raise InputError(f"option '{option}': layer indices are >= 0 (value {text!r})")
    return tuple(sorted(out))


def parse_window(text: str, option: str = "--draft-window") -> tuple[int, int]:
    """Parse ``"SINK,RECENT"`` (e.g. ``"4,64"``) into two ints. Raises: InputError."""
    parts = [s.strip() for s in text.split(",")]
    try:
        if len(parts) != 2:
            raise ValueError
        sink, recent = int(parts[0]), int(parts[1])
    except ValueError:
        raise InputError(f"option '{option}': expected SINK,RECENT, two integers such as 4,64 "
                         f"(value {text!r})") from None
    if sink < 0 or recent < 1:
        raise InputError(f"option '{option}': SINK must be >= 0 and RECENT >= 1 (value {text!r})")
    return sink, recent


# ----------------------------------------------------------------------------- files

def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class ModelSource:
    """A resolved local model: ``kind`` is ``dir`` or ``gguf``; ``files`` are hashed for metadata."""

    path: Path
    kind: str
    option: str
    files: tuple[Path, ...]

    @property
    def load_dir(self) -> Path:
        return self.path if self.kind == "dir" else self.path.parent

    def hashes(self) -> dict[str, str]:
        """{file name relative to the model: sha256}, in name order."""
        return {str(f.relative_to(self.load_dir)): sha256_file(f) for f in self.files}


def resolve_model(path: str, option: str) -> ModelSource:
    """Check that ``path`` is a loadable local model and list the files that define it.

    A directory needs ``config.json``, weights (``*.safetensors`` or ``pytorch_model*.bin``,
    every shard named by an index file present) and tokenizer files; a file must end in
    ``.gguf``. Raises: InputError naming the option and what is missing.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"option '{option}': {path}: no such file or directory "
                         f"(give a local model directory or .gguf file; nothing is downloaded)")
    if p.is_file():
        if p.suffix.lower() != ".gguf":
            raise InputError(f"option '{option}': {path}: not a model directory or a .gguf file")
        return ModelSource(p.resolve(), "gguf", option, (p.resolve(),))
    p = p.resolve()
    if not (p / "config.json").is_file():
        ggufs = sorted(x.name for x in p.glob("*.gguf"))
        hint = f"; it holds GGUF files, pass one of them (e.g. {p / ggufs[0]})" if ggufs else ""
        raise InputError(f"option '{option}': {path}: no config.json (expected a model directory with "
                         f"config.json, safetensors weights and tokenizer files, or a .gguf file){hint}")
    weights = sorted(p.glob("*.safetensors")) or sorted(p.glob("pytorch_model*.bin"))
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index = p / index_name
        if index.is_file():
            try:
                shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            except (ValueError, KeyError, TypeError):
                raise InputError(f"option '{option}': {index}: not a valid weight index") from None
            missing = [s for s in shards if not (p / s).is_file()]
            if missing:
                raise InputError(f"option '{option}': {path}: weight shard {missing[0]} named in {index_name} "
                                 f"is missing ({len(missing)} of {len(shards)} missing)")
    if not weights:
        raise InputError(f"option '{option}': {path}: no weight files (*.safetensors or pytorch_model*.bin)")
    tok_files = [n for n in ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
                 if (p / n).is_file()]
    if not tok_files:
        raise InputError(f"option '{option}': {path}: no tokenizer files (tokenizer.json, tokenizer.model "
                         f"or vocab.json)")
    small = [p / n for n in _SMALL_MODEL_FILES if (p / n).is_file()]
    index_files = [x for x in p.glob("*.index.json")]
    files = tuple(sorted(set(weights) | set(small) | set(index_files)))
    return ModelSource(p, "dir", option, files)


def read_prompts(path: str) -> tuple[list[str], list[int]]:
    """Read a prompts file: one prompt per line, blank lines ignored.

    Returns (prompts, 1-based line numbers). Raises: InputError for a missing, unreadable or
    non-UTF-8 file, or one without prompts.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"option '--prompts': {path}: no such file")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"option '--prompts': {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"option '--prompts': {path}: cannot read ({exc.strerror})") from None
    prompts, lines = [], []
    for i, line in enumerate(text.splitlines(), start=1):
        line = line.strip("\r\n")
        if line.strip():
            prompts.append(line)
            lines.append(i)
    if not prompts:
        raise InputError(f"option '--prompts': {path}: no prompts (one prompt per non-blank line)")
    return prompts, lines


def assign_splits(n: int, seed: int) -> dict[str, list[int]]:
    """Split text indices 0..n-1 by prompt: {split: sorted indices}.

    Rule: ``rng = numpy.random.default_rng(seed)``, ``perm = rng.permutation(n)``,
    ``h = max(1, round(0.1 n))``; valid = perm[:h], test = perm[h:2h], train = the rest.
    Raises: InputError if n < 3 (every split needs a prompt).
    """
    if n < 3:
        raise InputError(f"option '--prompts': {n} prompt(s); at least 3 are needed, one per split "
                         f"(train, valid, test)")
    perm = np.random.default_rng(seed).permutation(n)
    h = max(1, int(round(HELD_OUT_FRACTION * n)))
    return {"train": sorted(perm[2 * h:].tolist()), "valid": sorted(perm[:h].tolist()),
            "test": sorted(perm[h:2 * h].tolist())}


def processing_order(splits: dict[str, list[int]]) -> list[int]:
    """Text indices ordered so that the splits are interleaved in proportion.

    Text j of a split of size m gets the key (j + 0.5) / m; ties go to train, valid, test.
    After any prefix of this order every split has about its share of finished texts.
    """
    keyed = []
    for rank, name in enumerate(SPLITS):
        idx = splits[name]
        keyed += [((j + 0.5) / len(idx), rank, t) for j, t in enumerate(idx)]
    return [t for _, _, t in sorted(keyed)]


# ----------------------------------------------------------------------------- torch side

def _torch():
    """Import torch and transformers in offline mode, or explain how to install them."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise InputError(f"harvest needs the optional extra 'models' (torch, transformers, gguf, accelerate): "
                         f"pip install -e '.[models]' ({exc})") from None
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    return torch, transformers


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:200] if text else type(exc).__name__)


@dataclass
class LoadedModel:
    """A model with its tokenizer; ``vocab_out`` is the number of logits it produces."""

    source: ModelSource
    model: Any
    tokenizer: Any
    vocab_out: int

    @property
    def architecture(self) -> str:
        return type(self.model).__name__


def load_model(source: ModelSource, dtype: str = "float32", device: str = "cpu") -> LoadedModel:
    """Load a local model and its tokenizer (offline, ``local_files_only=True``).

    Raises: InputError (one line) if transformers cannot load it (unsupported architecture,
    damaged weights, custom code, GGUF without tokenizer data, unknown device).
    """
    torch, transformers = _torch()
    kwargs: dict[str, Any] = {"local_files_only": True}
    if source.kind == "gguf":
        kwargs["gguf_file"] = source.path.name
    where = f"option '{source.option}': {source.path}"
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(source.load_dir), **kwargs)
    except Exception as exc:  # transformers raises many types for unreadable tokenizers
        raise InputError(f"{where}: cannot load the tokenizer ({_short(exc)})") from None
    torch_dtype = getattr(torch, dtype)
    model = None
    for attn in ("sdpa", "eager"):
        try:
            model = transformers.AutoModelForCausalLM.from_pretrained(
                str(source.load_dir), dtype=torch_dtype, attn_implementation=attn, **kwargs)
            break
        except ValueError as exc:
            if attn == "eager" or "attn" not in str(exc).lower() and "sdpa" not in str(exc).lower():
                raise InputError(f"{where}: cannot load the model ({_short(exc)})") from None
        except Exception as exc:
            raise InputError(f"{where}: cannot load the model ({_short(exc)})") from None
    try:
        model = model.to(device)
    except Exception as exc:
        raise InputError(f"option '--device': cannot move the model to '{device}' ({_short(exc)})") from None
    model.eval()
    out = model.get_output_embeddings()
    vocab_out = int(out.weight.shape[0]) if out is not None else int(model.config.get_text_config().vocab_size)
    return LoadedModel(source, model, tokenizer, vocab_out)


#: Layer types whose KV cache can be cropped after a rejected draft (others keep recurrent state).
ROLLBACK_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")


def check_rollback(loaded: LoadedModel) -> None:
    """Refuse models with layers whose state cannot be rolled back after a rejection (linear
    attention, Mamba-style hybrids: ``config.layer_types`` outside :data:`ROLLBACK_LAYER_TYPES`).

    Raises: InputError naming the option, the model and the layer type.
    """
    cfg = loaded.model.config.get_text_config()
    bad = sorted({str(t) for t in (getattr(cfg, "layer_types", None) or [])} - set(ROLLBACK_LAYER_TYPES))
    if bad:
        raise InputError(f"option '{loaded.source.option}': {loaded.source.path}: layers of type '{bad[0]}' keep a "
                         f"recurrent state that cannot be rolled back after a rejected draft; only attention "
                         f"models are supported")


def check_same_tokenizer(target: LoadedModel, draft: LoadedModel, vocab: int) -> None:
    """Refuse a draft model whose tokenizer differs from the target's.

    Compares the token strings of every id below ``vocab`` (the logits both models produce;
    tokens past them can never be drafted or sampled). Raises: InputError with the reason
    (vocabulary sizes and the first differing id).
    """
    tv, dv = target.tokenizer.get_vocab(), draft.tokenizer.get_vocab()
    t_by_id = {i: t for t, i in tv.items() if i < vocab}
    d_by_id = {i: t for t, i in dv.items() if i < vocab}
    if t_by_id == d_by_id:
        return
    i = min(j for j in set(t_by_id) | set(d_by_id) if t_by_id.get(j) != d_by_id.get(j))
    raise InputError(f"option '--draft': {draft.source.path}: tokenizer differs from the target's (vocabularies "
                     f"of {len(tv)} vs {len(dv)} tokens; id {i} is {t_by_id.get(i)!r} vs {d_by_id.get(i)!r}); "
                     f"a draft model must share the target's tokenizer")


def encode_prompt(tokenizer, prompt: str, where: str, vocab: int | None = None) -> list[int]:
    """Token ids of a prompt: the chat template (user turn + generation prompt) when the tokenizer
    has one, else plain encoding with the tokenizer's special tokens.

    Raises: InputError if the prompt encodes to nothing or to an id >= ``vocab`` (the models' logits).
    """
    if getattr(tokenizer, "chat_template", None):
        text = tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                             add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        ids = tokenizer(prompt)["input_ids"]
    ids = [int(i) for i in ids]
    if not ids:
        raise InputError(f"{where}: the prompt encodes to no tokens")
    if vocab is not None and max(ids) >= vocab:
        raise InputError(f"{where}: token id {max(ids)} is outside the models' {vocab} logits")
    return ids


def eos_ids(loaded: LoadedModel) -> set[int]:
    """End-of-sequence ids: the generation config's ``eos_token_id`` (int or list) and the tokenizer's."""
    ids: set[int] = set()
    gen = getattr(loaded.model, "generation_config", None)
    for value in (getattr(gen, "eos_token_id", None), getattr(loaded.tokenizer, "eos_token_id", None)):
        if value is None:
            continue
        ids.update(int(v) for v in (value if isinstance(value, (list, tuple)) else [value]))
    return ids


# ----------------------------------------------------------------------------- distributions

def distributions(logits, temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """Probabilities and entropies from logits, in float64.

    Args: ``logits`` torch tensor (m, V) of any float dtype; ``temperature`` T >= 0.
    Returns: probs float64 (m, V) = softmax(logits / T) (one-hot at the lowest arg max for
    T = 0) and entropies float64 (m,) in nats (>= 0).
    """
    import torch

    x = logits.detach().to(device="cpu", dtype=torch.float64)
    if temperature == 0:
        probs = np.zeros(tuple(x.shape), dtype=np.float64)
        probs[np.arange(x.shape[0]), x.numpy().argmax(axis=1)] = 1.0
        return probs, np.zeros(x.shape[0], dtype=np.float64)
    logp = torch.log_softmax(x / temperature, dim=-1)
    p = torch.exp(logp)
    ent = torch.clamp(-(p * logp).sum(dim=-1), min=0.0)
    return p.numpy(), ent.numpy()


def sample_index(probs: np.ndarray, u: float) -> int:
    """Inverse-CDF sample of a float64 distribution (V,) with a uniform u in [0, 1).

    Never returns a zero-probability index. Raises nothing.
    """
    c = np.cumsum(probs)
    i = int(np.searchsorted(c, u * c[-1], side="right"))
    if i >= probs.size:
        i = int(np.flatnonzero(probs > 0)[-1])
    return i


def residual_distribution(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Standard rule's residual norm(max(0, p - q)) (Leviathan et al. 2023, arXiv 2211.17192).

    Args: float64 (V,) target p and draft q. Returns float64 (V,) summing to 1 (p itself in the
    degenerate case max(0, p - q) = 0, which a rejection cannot produce in exact arithmetic).
    """
    r = np.maximum(p - q, 0.0)
    s = r.sum()
    return r / s if s > 0 else p


def block_records(p: np.ndarray, q: np.ndarray, p_ent: np.ndarray, q_ent: np.ndarray,
                  drafts: Sequence[int], u: np.ndarray) -> dict[str, np.ndarray]:
    """Schema columns (all but ``seq_id`` and ``position``) of one block's k drafted tokens.

    Args: p, q float64 (k, V) target and draft distributions at each depth; p_ent, q_ent
    float64 (k,) their entropies (nats); drafts (k,) token ids; u float64 (k,) uniforms.
    Returns: dict of arrays of length k (float64, bool, int64) as in :mod:`data.schema`.
    """
    k = len(drafts)
    rows = np.arange(k)
    x = np.asarray(drafts, dtype=np.int64)
    dp, tp = q[rows, x], p[rows, x]
    r = np.minimum(1.0, tp / dp)
    return {
        "draft_prob": dp,
        "target_prob": tp,
        "draft_entropy": np.asarray(q_ent, dtype=np.float64),
        "target_entropy": np.asarray(p_ent, dtype=np.float64),
        "top_token_match": q.argmax(axis=1) == p.argmax(axis=1),
        "rand_value": np.asarray(u, dtype=np.float64),
        "baseline_accepts": u < r,
        "draft_index": rows.astype(np.int64),
        "draft_top_prob": q.max(axis=1),
        "target_top_prob": p.max(axis=1),
        "overlap": np.clip(np.minimum(p, q).sum(axis=1), 0.0, 1.0),
    }


# ----------------------------------------------------------------------------- decoding

def _crop_cache(cache, length: int) -> None:
    """Crop every layer of a transformers ``DynamicCache`` to ``length`` positions."""
    for layer in cache.layers:
        n = layer.get_seq_length()
        if n > length:
            layer.crop(length - n)


def _shallow(module):
    """A copy of an nn.Module that shares its parameters, buffers and submodules."""
    c = copy.copy(module)
    c._modules = dict(module._modules)
    c._parameters = dict(module._parameters)
    c._buffers = dict(module._buffers)
    return c


class _Runner:
    """Runs one causal LM forward pass on a KV cache with explicit positions (and mask)."""

    def __init__(self, model, vocab: int, device: str):
        import inspect

        self.model = model
        self.vocab = vocab
        self.device = device
        self.dtype = next(model.parameters()).dtype
        self.keep_arg = "logits_to_keep" in inspect.signature(model.forward).parameters

    def __call__(self, ids: Sequence[int], start: int, cache, n_logits: int, allowed=None):
        """Feed ``ids`` at positions start.. on ``cache``; return the last ``n_logits`` logits (n, V).

        ``allowed(i, j)`` (torch broadcasting on query positions i and key positions j) restricts
        attention beyond causality; then a 4-D additive mask is passed.
        """
        import torch

        q = len(ids)
        kwargs: dict[str, Any] = {
            "input_ids": torch.tensor([list(ids)], dtype=torch.long, device=self.device),
            "position_ids": torch.arange(start, start + q, device=self.device).unsqueeze(0),
            "past_key_values": cache,
            "use_cache": True,
        }
        if allowed is not None:
            i = torch.arange(start, start + q, device=self.device)[:, None]
            j = torch.arange(start + q, device=self.device)[None, :]
            ok = (j <= i) & allowed(i, j)
            mask = torch.zeros((1, 1, q, start + q), dtype=self.dtype, device=self.device)
            kwargs["attention_mask"] = mask.masked_fill(~ok, torch.finfo(self.dtype).min)
        if self.keep_arg:
            kwargs["logits_to_keep"] = max(1, n_logits)
        logits = self.model(**kwargs).logits
        return logits[0, logits.shape[1] - n_logits:, : self.vocab]


def _new_cache():
    from transformers import DynamicCache

    return DynamicCache()


@dataclass
class TextState:
    """Decoding state of one text: context ids, target KV cache and its length, drafter state."""

    ctx: list[int]
    prompt_len: int
    cache: Any
    cache_len: int
    draft_cache: Any = None
    draft_len: int = 0


@dataclass
class BlockResult:
    """One speculation block: drafts, the number the standard rule accepted, the emitted tokens
    and the records (columns without ``seq_id``/``position``)."""

    start: int
    drafts: list[int]
    accepted: int
    emitted: list[int]
    records: dict[str, np.ndarray]


class Drafter:
    """Base class: proposes up to k tokens with their full draft distributions."""

    kind = ""

    def settings(self) -> dict[str, Any]:
        raise NotImplementedError

    def start(self, engine: "SpeculativeEngine", state: TextState) -> None:
        """Prepare drafter state for a new text (``state.ctx`` is the prompt)."""

    def propose(self, engine: "SpeculativeEngine", state: TextState, k: int, rng: np.random.Generator):
        """Draft up to k tokens (stopping after an end-of-sequence token).

        Returns: (token ids list, q float64 (k', V), entropies float64 (k',)).
        """
        raise NotImplementedError

    def commit(self, engine: "SpeculativeEngine", state: TextState, valid: int) -> None:
        """Keep drafter state for the first ``valid`` context tokens only."""

    def _draft_loop(self, run, state, start, feed, k, rng, engine, cache, allowed=None):
        drafts, dists, ents = [], [], []
        for _ in range(k):
            logits = run(feed, start, cache, 1, allowed)
            q, h = distributions(logits, engine.temperature)
            x = sample_index(q[0], rng.random())
            drafts.append(x)
            dists.append(q[0])
            ents.append(h[0])
            start += len(feed)
            feed = [x]
            if x in engine.eos:
                break
        return drafts, np.stack(dists), np.asarray(ents), start


class ModelDrafter(Drafter):
    """A second model sharing the target's tokenizer, with its own KV cache."""

    kind = "model"

    def __init__(self, loaded: LoadedModel, vocab: int, device: str):
        self.loaded = loaded
        self.run = _Runner(loaded.model, vocab, device)

    def settings(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.loaded.source.path), "format": self.loaded.source.kind,
                "architecture": self.loaded.architecture}

    def start(self, engine, state):
        state.draft_cache = _new_cache()
        state.draft_len = 0
        if len(state.ctx) > 1:
            self.run(state.ctx[:-1], 0, state.draft_cache, 1)
            state.draft_len = len(state.ctx) - 1

    def propose(self, engine, state, k, rng):
        feed = state.ctx[state.draft_len:]
        drafts, q, h, state.draft_len = self._draft_loop(self.run, state, state.draft_len, feed, k, rng,
                                                         engine, state.draft_cache)
        return drafts, q, h

    def commit(self, engine, state, valid):
        if state.draft_len > valid:
            _crop_cache(state.draft_cache, valid)
            state.draft_len = valid


class _SelfDrafter(Drafter):
    """A drafter that runs (part of) the target on the target's own KV cache, then crops it back."""

    def __init__(self, model, vocab: int, device: str):
        self.run = _Runner(model, vocab, device)

    def allowed(self):
        return lambda i, j: j >= 0

    def propose(self, engine, state, k, rng):
        feed = state.ctx[state.cache_len:]
        try:
            drafts, q, h, _ = self._draft_loop(self.run, state, state.cache_len, feed, k, rng, engine,
                                               state.cache, self.allowed())
        finally:
            _crop_cache(state.cache, state.cache_len)
        return drafts, q, h


class SkipLayerDrafter(_SelfDrafter):
    """Draft & Verify self-speculation: the target with some decoder layers skipped
    (Zhang et al. 2024, arXiv 2309.08168). Shares weights and KV cache with the target."""

    kind = "skip_layers"

    def __init__(self, target: LoadedModel, skip: Sequence[int], vocab: int, device: str):
        model = target.model
        inner = getattr(model, "model", None)
        layers = getattr(inner, "layers", None)
        import torch

        if not isinstance(layers, torch.nn.ModuleList):
            raise InputError(f"option '--draft-skip-layers': the target's architecture ({type(model).__name__}) "
                             f"keeps no decoder layers in model.model.layers; layer skipping supports "
                             f"Llama-like models only")
        n = len(layers)
        bad = [i for i in skip if i >= n]
        if bad:
            raise InputError(f"option '--draft-skip-layers': layer {bad[0]} does not exist; the target has "
                             f"{n} decoder layers (0..{n - 1})")
        keep = [i for i in range(n) if i not in set(skip)]
        if not keep:
            raise InputError(f"option '--draft-skip-layers': skips all {n} decoder layers; keep at least one")
        draft_inner = _shallow(inner)
        draft_inner.layers = torch.nn.ModuleList([layers[i] for i in keep])
        draft = _shallow(model)
        draft.model = draft_inner
        self.skip = tuple(sorted(set(skip)))
        self.keep = tuple(keep)
        self.n_layers = n
        super().__init__(draft, vocab, device)

    def settings(self) -> dict[str, Any]:
        return {"kind": self.kind, "skip_layers": list(self.skip), "kept_layers": len(self.keep),
                "target_layers": self.n_layers}


class WindowDrafter(_SelfDrafter):
    """StreamingLLM-style sparse-KV self-speculation (TriForce, MagicDec): the target attending
    only to the first ``sink`` tokens and the ``recent`` most recent ones (the query included)."""

    kind = "window"

    def __init__(self, target: LoadedModel, sink: int, recent: int, vocab: int, device: str):
        self.sink, self.recent = int(sink), int(recent)
        super().__init__(target.model, vocab, device)

    def allowed(self):
        sink, recent = self.sink, self.recent
        return lambda i, j: (j < sink) | (i - j < recent)

    def settings(self) -> dict[str, Any]:
        return {"kind": self.kind, "sink": self.sink, "recent": self.recent}


@dataclass
class TextResult:
    """A generated text: continuation ids, why it stopped (``eos``/``length``), its blocks and
    the number of target passes after the prefill."""

    tokens: list[int]
    finish: str
    blocks: list[BlockResult]
    target_calls: int

    def frame(self, seq_id: int) -> pd.DataFrame:
        """The text's records as a schema DataFrame (columns in schema order)."""
        cols: dict[str, list] = {}
        for b in self.blocks:
            k = len(b.drafts)
            parts = dict(b.records, seq_id=np.full(k, seq_id, dtype=np.int64),
                         position=np.arange(b.start, b.start + k, dtype=np.int64))
            for name, values in parts.items():
                cols.setdefault(name, []).append(values)
        if not cols:
            return pd.DataFrame({c: pd.Series(dtype=_dtype(c)) for c in _COLUMN_ORDER})
        return pd.DataFrame({c: np.concatenate(cols[c]) for c in _COLUMN_ORDER})


def _dtype(col: str) -> str:
    kind = next(c.kind for c in COLUMNS if c.name == col)
    return {"int": "int64", "float": "float64", "bool": "bool"}[kind]


class SpeculativeEngine:
    """Target model + drafter: runs speculative sampling and records every drafted token.

    Args: target (LoadedModel), drafter (:class:`Drafter`), temperature (>= 0), vocab V (number
    of logits used; covers the tokenizer), eos (set of end-of-sequence ids), device.
    """

    def __init__(self, target: LoadedModel, drafter: Drafter, temperature: float, vocab: int,
                 eos: set[int], device: str = "cpu"):
        self.target = target
        self.drafter = drafter
        self.temperature = float(temperature)
        self.vocab = vocab
        self.eos = set(eos)
        self.run = _Runner(target.model, vocab, device)

    def start(self, prompt_ids: Sequence[int]) -> TextState:
        """Prefill the target (and drafter) caches with the prompt minus its last token."""
        ctx = [int(t) for t in prompt_ids]
        state = TextState(ctx=ctx, prompt_len=len(ctx), cache=_new_cache(), cache_len=0)
        if len(ctx) > 1:
            self.run(ctx[:-1], 0, state.cache, 1)
            state.cache_len = len(ctx) - 1
        self.drafter.start(self, state)
        return state

    def block(self, state: TextState, k: int, rng: np.random.Generator) -> BlockResult:
        """One speculation block with up to k drafts; advances ``state`` by the standard rule.

        Random draws, in order: the drafts' sampling uniforms, k' acceptance uniforms, one uniform
        for the residual/bonus token. Returns the :class:`BlockResult`.
        """
        L = len(state.ctx)
        drafts, q, q_ent = self.drafter.propose(self, state, k, rng)
        k = len(drafts)
        feed = state.ctx[state.cache_len:] + drafts
        logits = self.run(feed, state.cache_len, state.cache, k + 1)
        p, p_ent = distributions(logits, self.temperature)
        u = rng.random(k)
        u_next = rng.random()
        records = block_records(p[:k], q, p_ent[:k], q_ent, drafts, u)
        rejected = np.flatnonzero(~records["baseline_accepts"])
        n = int(rejected[0]) if rejected.size else k
        if n < k:
            nxt = sample_index(residual_distribution(p[n], q[n]), u_next)
        else:
            nxt = sample_index(p[k], u_next)
        emitted = drafts[:n] if (n == k and drafts[-1] in self.eos) else drafts[:n] + [nxt]
        _crop_cache(state.cache, L + n)
        state.cache_len = L + n
        self.drafter.commit(self, state, L + n)
        state.ctx.extend(emitted)
        return BlockResult(L - state.prompt_len, list(drafts), n, emitted, records)

    def target_step(self, state: TextState, rng: np.random.Generator) -> int:
        """Sample one token from the target alone (used when one token of budget is left)."""
        logits = self.run(state.ctx[state.cache_len:], state.cache_len, state.cache, 1)
        p, _ = distributions(logits, self.temperature)
        tok = sample_index(p[0], rng.random())
        state.cache_len = len(state.ctx)
        state.ctx.append(tok)
        return tok

    def generate(self, prompt_ids: Sequence[int], gamma: int, max_new_tokens: int, rng: np.random.Generator,
                 on_block: Callable[[int], None] | None = None) -> TextResult:
        """Generate one text of at most ``max_new_tokens`` tokens by speculative sampling.

        Block sizes are min(gamma, remaining - 1) so the budget is never exceeded; with one token
        left the target samples it alone (no record). Stops after an end-of-sequence token.
        ``on_block(n_emitted)`` is called after every block (progress).
        """
        import torch

        with torch.inference_mode():
            state = self.start(prompt_ids)
            blocks: list[BlockResult] = []
            calls = 0
            finish = "length"
            while True:
                generated = len(state.ctx) - state.prompt_len
                remaining = max_new_tokens - generated
                if remaining <= 0:
                    break
                if remaining == 1:
                    emitted = [self.target_step(state, rng)]
                else:
                    b = self.block(state, min(gamma, remaining - 1), rng)
                    blocks.append(b)
                    emitted = b.emitted
                calls += 1
                if on_block is not None:
                    on_block(len(emitted))
                if emitted and emitted[-1] in self.eos:
                    finish = "eos"
                    break
        return TextResult(state.ctx[state.prompt_len:], finish, blocks, calls)


# ----------------------------------------------------------------------------- harvest

@dataclass
class Setup:
    """Loaded models, drafter and engine for a :class:`HarvestConfig`, plus what metadata needs."""

    config: HarvestConfig
    target: LoadedModel
    draft: LoadedModel | None
    engine: SpeculativeEngine
    description: dict[str, Any]


def build(config: HarvestConfig) -> Setup:
    """Resolve and load the models, check the tokenizer, build the drafter and the engine.

    Raises: InputError for missing paths or weights, a tokenizer mismatch, layer indices or a
    window that do not fit the target, an unsupported architecture.
    """
    config.check()
    target_src = resolve_model(config.target, "--target")
    if config.threads is not None:
        torch, _ = _torch()
        torch.set_num_threads(config.threads)
    draft_src = resolve_model(config.draft, "--draft") if config.draft is not None else None
    target = load_model(target_src, config.dtype, config.device)
    draft = load_model(draft_src, config.dtype, config.device) if draft_src is not None else None
    for loaded in (target, draft):
        if loaded is not None:
            check_rollback(loaded)
    vocab = target.vocab_out
    if draft is not None:
        vocab = min(vocab, draft.vocab_out)
        check_same_tokenizer(target, draft, vocab)
    if draft is not None:
        drafter: Drafter = ModelDrafter(draft, vocab, config.device)
    elif config.skip_layers is not None:
        drafter = SkipLayerDrafter(target, config.skip_layers, vocab, config.device)
    else:
        drafter = WindowDrafter(target, *config.window, vocab, config.device)
    eos = eos_ids(target)
    engine = SpeculativeEngine(target, drafter, config.temperature, vocab, eos, config.device)
    description = {
        "target": {"path": str(target_src.path), "format": target_src.kind, "architecture": target.architecture,
                   "sha256": target_src.hashes()},
        "drafter": dict(drafter.settings(), **({"sha256": draft_src.hashes()} if draft_src else {})),
        "vocab_size": vocab,
        "eos_token_ids": sorted(eos),
        "chat_template": bool(getattr(target.tokenizer, "chat_template", None)),
    }
    return Setup(config, target, draft, engine, description)


def text_rng(seed: int, index: int) -> np.random.Generator:
    """The random stream of text ``index``: ``numpy.random.default_rng([seed, index])``."""
    return np.random.default_rng([seed, index])


@dataclass
class HarvestResult:
    """Outcome of :func:`harvest`: done/total texts, whether it was interrupted and whether the
    dataset files were (re)written, the per-split statistics and the output directory."""

    out: Path
    texts_done: int
    texts_total: int
    interrupted: bool
    consolidated: bool
    stats: dict[str, dict]
    tokens_generated: int
    seconds: float


def _fingerprint(config: HarvestConfig, setup: Setup, prompts_sha: str) -> dict[str, Any]:
    d = setup.description
    return {
        "generator_version": GENERATOR_VERSION,
        "target_sha256": d["target"]["sha256"],
        "drafter": {k: v for k, v in d["drafter"].items() if k not in ("path",)},
        "gamma": config.gamma, "max_new_tokens": config.max_new_tokens,
        "temperature": config.temperature, "seed": config.seed, "dtype": config.dtype,
        "prompts_sha256": prompts_sha, "chat_template": d["chat_template"],
    }


def _diff(a: dict, b: dict, prefix: str = "") -> str:
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            sub = _diff(va, vb, f"{prefix}{key}.")
            if sub:
                return sub
        elif va != vb:
            return f"{prefix}{key}: {_brief(va)} then, {_brief(vb)} now"
    return ""


def _brief(v) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _part_path(work: Path, index: int) -> Path:
    return work / "parts" / f"text-{index:06d}.parquet"


def _write_part(path: Path, df: pd.DataFrame, info: dict[str, Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[b"harvest"] = json.dumps(info).encode("utf-8")
    buf = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(meta), buf)
    atomic_write_bytes(path, buf.getvalue())


def _read_part(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
        info = json.loads((table.schema.metadata or {})[b"harvest"])
    except Exception as exc:
        raise InputError(f"{path}: damaged harvest part file ({_short(exc)}); delete it to redo that text") from None
    return table.to_pandas(), info


def _check_out_dir(out: Path, work: Path, fingerprint: dict[str, Any] | None) -> None:
    """Refuse an output directory holding another generator's dataset, or (with ``fingerprint``)
    a harvest made with other settings."""
    manifest = work / MANIFEST_FILE
    if manifest.exists():
        if fingerprint is None:
            return
        try:
            old = json.loads(manifest.read_text())["fingerprint"]
        except (ValueError, KeyError, TypeError):
            raise InputError(f"{manifest}: damaged harvest manifest; remove {work} to start over") from None
        diff = _diff(old, fingerprint)
        if diff:
            raise InputError(f"option '--out': {out} holds a harvest made with other settings ({diff}); "
                             f"use another --out or remove {work} to start over")
        return
    if (out / METADATA_FILE).exists():
        meta = load_metadata(out)
        if meta.get("generator") != GENERATOR:
            raise InputError(f"option '--out': {out} holds a dataset made by generator "
                             f"{meta.get('generator')!r}; choose another directory for the harvest")


def harvest(config: HarvestConfig, progress: bool = True,
            on_text_done: Callable[[int], None] | None = None,
            console=None) -> HarvestResult:
    """Run (or resume) a harvest and write the dataset into ``config.out``.

    Args:
        config: the options (see :class:`HarvestConfig`).
        progress: show a rich progress bar (texts, tokens, tokens per second) on ``console``
            (default: stderr).
        on_text_done: called with the text index after each text is safely on disk.

    Returns: :class:`HarvestResult`. A KeyboardInterrupt stops the harvest between blocks: the
    text in progress is dropped (it is redone on resume) and the finished ones are consolidated
    into a valid dataset (if every split has a finished text); ``interrupted`` is then True.

    Raises: InputError for bad options or files (see :func:`build`, :func:`read_prompts`,
    :func:`assign_splits`), or an output directory holding other data or other settings.
    """
    config.check()
    prompts, lines = read_prompts(config.prompts)
    splits = assign_splits(len(prompts), config.seed)
    prompts_sha = sha256_file(config.prompts)
    out = check_output_dir(config.out)
    work = out / WORK_DIR
    _check_out_dir(out, work, None)
    console = console or _stderr_console()
    if progress and console.is_terminal:
        console.print(f"harvest: loading and hashing the models ({config.target}"
                      f"{', ' + config.draft if config.draft else ''})", soft_wrap=True)
    setup = build(config)
    fingerprint = _fingerprint(config, setup, prompts_sha)
    _check_out_dir(out, work, fingerprint)
    tokenizer = setup.target.tokenizer
    encoded = [encode_prompt(tokenizer, p, f"option '--prompts': {config.prompts}, line {ln}", setup.engine.vocab)
               for p, ln in zip(prompts, lines)]
    atomic_write_text(work / MANIFEST_FILE, json.dumps(
        {"generator": GENERATOR, "fingerprint": fingerprint, "texts_total": len(prompts)}, indent=2))
    split_of = {t: name for name, idx in splits.items() for t in idx}
    order = processing_order(splits)
    todo = [t for t in order if not _part_path(work, t).exists()]
    done_before = len(order) - len(todo)

    t0 = time.perf_counter()
    tokens = 0
    interrupted = False
    bar = _Progress(console, len(order), done_before, enabled=progress)
    try:
        with bar:
            for t in todo:
                def on_block(n: int) -> None:
                    nonlocal tokens
                    tokens += n
                    bar.tokens(tokens, time.perf_counter() - t0)

                result = setup.engine.generate(encoded[t], config.gamma, config.max_new_tokens,
                                               text_rng(config.seed, t), on_block)
                info = {"seq_id": t, "split": split_of[t], "line": lines[t], "prompt": prompts[t],
                        "completion": tokenizer.decode(result.tokens, skip_special_tokens=False),
                        "completion_ids": result.tokens, "prompt_tokens": len(encoded[t]),
                        "tokens": len(result.tokens), "finish": result.finish,
                        "target_calls": result.target_calls, "blocks": len(result.blocks)}
                _write_part(_part_path(work, t), result.frame(t), info)
                bar.text_done()
                if on_text_done is not None:
                    on_text_done(t)
    except KeyboardInterrupt:
        interrupted = True
    seconds = time.perf_counter() - t0
    consolidated, stats, n_done = consolidate(out, config, setup.description, splits, prompts_sha,
                                              run_seconds=seconds, run_tokens=tokens)
    return HarvestResult(out, n_done, len(order), interrupted, consolidated, stats, tokens, seconds)


def consolidate(out: Path, config: HarvestConfig, description: dict[str, Any], splits: dict[str, list[int]],
                prompts_sha: str, run_seconds: float = 0.0,
                run_tokens: int = 0) -> tuple[bool, dict[str, dict], int]:
    """Gather the finished texts' part files into train/valid/test, texts.jsonl and metadata.json.

    Returns (written, {split: stats}, texts done). Nothing is written unless every split has a
    finished text. Raises: InputError for a damaged part file.
    """
    work = out / WORK_DIR
    frames: dict[str, list[pd.DataFrame]] = {s: [] for s in SPLITS}
    infos: list[dict[str, Any]] = []
    for name in SPLITS:
        for t in splits[name]:
            path = _part_path(work, t)
            if path.exists():
                df, info = _read_part(path)
                frames[name].append(df)
                infos.append(info)
    n_done = len(infos)
    total = sum(len(v) for v in splits.values())
    if any(not frames[s] for s in SPLITS):
        return False, {}, n_done
    tables = {s: pd.concat(frames[s], ignore_index=True)[_COLUMN_ORDER] for s in SPLITS}
    stats: dict[str, dict] = {}
    for s in SPLITS:
        traces = Traces.from_frame(tables[s], source=f"harvest {s} split", split=s)
        mine = [i for i in infos if i["split"] == s]
        gen = sum(i["tokens"] for i in mine)
        calls = sum(i["target_calls"] for i in mine)
        stats[s] = dict(split_stats(traces.columns), texts=len(mine), generated_tokens=gen,
                        tokens_per_target_call=gen / calls if calls else 0.0,
                        eos_finished=sum(i["finish"] == "eos" for i in mine))
    is_complete = n_done == total
    metadata = {
        "generator": GENERATOR,
        "generator_version": GENERATOR_VERSION,
        "description": "genuine speculative-decoding blocks of a local target model and drafter (standard rule)",
        "seed": config.seed,
        "config": {**{k: v for k, v in asdict(config).items()}, "prompts_sha256": prompts_sha,
                   "prompts_path": str(Path(config.prompts).resolve()), **description,
                   "split_rule": (f"rng = numpy.random.default_rng(seed); perm = rng.permutation(n); "
                                  f"h = max(1, round({HELD_OUT_FRACTION} n)); valid = perm[:h], "
                                  f"test = perm[h:2h], train = perm[2h:]"),
                   "text_rng": "numpy.random.default_rng([seed, seq_id])"},
        "splits": {s: splits[s] for s in SPLITS},
        "complete": is_complete,
        "texts_done": n_done,
        "texts_total": total,
        "versions": _versions(),
        "last_run": {"seconds": round(run_seconds, 3), "generated_tokens": run_tokens,
                     "tokens_per_second": run_tokens / run_seconds if run_seconds > 0 else 0.0},
        "statistics": stats,
    }
    texts = "".join(json.dumps({k: i[k] for k in ("seq_id", "split", "line", "prompt", "completion", "tokens",
                                                  "finish")}) + "\n"
                    for i in sorted(infos, key=lambda i: i["seq_id"]))
    atomic_write_text(out / TEXTS_FILE, texts)
    write_dataset(out, tables, metadata)
    return True, stats, n_done


def _versions() -> dict[str, str]:
    import sys

    vers = {"python": sys.version.split()[0]}
    for mod in ("torch", "transformers", "gguf"):
        try:
            vers[mod] = __import__(mod).__version__
        except Exception:  # optional packages
            pass
    return vers


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


class _Progress:
    """Rich progress bar over texts with generated tokens and tokens per second."""

    def __init__(self, console, total: int, done: int, enabled: bool = True):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        self.enabled = enabled
        self.progress = Progress(TextColumn("harvest texts"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[tokens]} tokens"),
                                 TextColumn("{task.fields[tps]:.1f} tok/s"), TimeElapsedColumn(),
                                 TimeRemainingColumn(), console=console, disable=not enabled)
        self.task = self.progress.add_task("harvest", total=total, completed=done, tokens=0, tps=0.0)

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def tokens(self, n: int, seconds: float) -> None:
        self.progress.update(self.task, tokens=n, tps=n / seconds if seconds > 0 else 0.0)

    def text_done(self) -> None:
        self.progress.advance(self.task)
