"""Local target and draft models: finding their files, loading them offline, checking that they fit.

A model ``PATH`` is a local Hugging Face model directory (``config.json``,
safetensors or ``pytorch_model*.bin`` weights, tokenizer files) or a local
``.gguf`` file, loaded through transformers' GGUF support (``gguf_file=``; weights
are dequantised). Offline mode is forced (``HF_HUB_OFFLINE=1``,
``TRANSFORMERS_OFFLINE=1``, ``local_files_only=True``) and only existing local
paths are accepted, so nothing is ever fetched from a hub.

Models whose layers keep a recurrent state (linear attention, Mamba-style
hybrids) are refused (:func:`check_rollback`): their cache cannot be rolled back
after a rejected draft. A draft model must share the target's tokenizer
(:func:`check_same_tokenizer`).

``_torch`` and ``_short`` are helpers shared inside :mod:`evolve.harvest`.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evolve.errors import InputError
from evolve.files.digest import sha256_file

_SMALL_MODEL_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                      "tokenizer.model", "special_tokens_map.json", "vocab.json", "merges.txt",
                      "added_tokens.json", "chat_template.jinja", "chat_template.json")


@dataclass(frozen=True)
class ModelSource:
    """A resolved local model: ``file_format`` is ``dir`` or ``gguf``; ``param`` the parameter that named it (``target``,
    ``draft``: errors about the model name it); ``files`` are hashed for metadata."""

    path: Path
    file_format: str
    param: str
    files: tuple[Path, ...]

    @property
    def load_dir(self) -> Path:
        """The directory transformers loads from (the model directory, or the .gguf file's directory)."""
        return self.path if self.file_format == "dir" else self.path.parent

    def hashes(self) -> dict[str, str]:
        """{file name relative to the model: sha256}, in name order."""
        return {str(f.relative_to(self.load_dir)): sha256_file(f) for f in self.files}


def resolve_model(path: str, param: str) -> ModelSource:
    """Check that ``path`` is a loadable local model and list the files that define it.

    A directory needs ``config.json``, weights (``*.safetensors`` or ``pytorch_model*.bin``,
    every shard named by an index file present) and tokenizer files; a file must end in
    ``.gguf``. Raises: InputError naming the parameter ``param`` and what is missing.
    """
    p = Path(path).expanduser()
    if not p.exists():
        raise InputError(f"{path}: no such file or directory "
                         f"(give a local model directory or .gguf file; nothing is downloaded)", param=param)
    if p.is_file():
        if p.suffix.lower() != ".gguf":
            raise InputError(f"{path}: not a model directory or a .gguf file", param=param)
        return ModelSource(p.resolve(), "gguf", param, (p.resolve(),))
    p = p.resolve()
    if not (p / "config.json").is_file():
        ggufs = sorted(x.name for x in p.glob("*.gguf"))
        hint = f"; it holds GGUF files, pass one of them (e.g. {p / ggufs[0]})" if ggufs else ""
        raise InputError(f"{path}: no config.json (expected a model directory with "
                         f"config.json, safetensors weights and tokenizer files, or a .gguf file){hint}", param=param)
    weights = sorted(p.glob("*.safetensors")) or sorted(p.glob("pytorch_model*.bin"))
    for index_name in ("model.safetensors.index.json", "pytorch_model.bin.index.json"):
        index = p / index_name
        if index.is_file():
            try:
                shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            except (ValueError, KeyError, TypeError):
                raise InputError(f"{index}: not a valid weight index", param=param) from None
            missing = [s for s in shards if not (p / s).is_file()]
            if missing:
                raise InputError(f"{path}: weight shard {missing[0]} named in {index_name} "
                                 f"is missing ({len(missing)} of {len(shards)} missing)", param=param)
    if not weights:
        raise InputError(f"{path}: no weight files (*.safetensors or pytorch_model*.bin)", param=param)
    tok_files = [n for n in ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
                 if (p / n).is_file()]
    if not tok_files:
        raise InputError(f"{path}: no tokenizer files (tokenizer.json, tokenizer.model or vocab.json)",
                         param=param)
    small = [p / n for n in _SMALL_MODEL_FILES if (p / n).is_file()]
    index_files = [x for x in p.glob("*.index.json")]
    files = tuple(sorted(set(weights) | set(small) | set(index_files)))
    return ModelSource(p, "dir", param, files)


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


@contextlib.contextmanager
def quiet_loading():
    """Silence transformers' progress bars while a model loads, also the one its GGUF reader draws with tqdm
    directly ("Converting and de-quantizing GGUF tensors", which ``disable_progress_bar`` does not reach): the
    commands say on their own lines what they load (``--progress`` draws the harvest's bar, never transformers')."""
    try:
        from transformers import modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # transformers without GGUF support: nothing draws a bar of its own
        yield
        return
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is None:
        yield
        return
    gguf_utils.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = bar


def context_length(loaded: "LoadedModel") -> int | None:
    """The most positions the loaded model attends over: a llama.cpp model's context (``n_ctx()``), a transformers
    model's ``max_position_embeddings`` (of its text config); None when it gives none."""
    model = loaded.model
    n_ctx = getattr(model, "n_ctx", None)
    if callable(n_ctx):
        return int(n_ctx())
    config = getattr(model, "config", None)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    value = getattr(text, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


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
        """The model class name, e.g. ``LlamaForCausalLM``."""
        return type(self.model).__name__


def load_model(source: ModelSource, dtype: str = "float32", device: str = "cpu") -> LoadedModel:
    """Load a local model and its tokenizer (offline, ``local_files_only=True``).

    Raises: InputError (one line) if transformers cannot load it (unsupported architecture,
    damaged weights, custom code, GGUF without tokenizer data, unknown device).
    """
    torch, transformers = _torch()
    kwargs: dict[str, Any] = {"local_files_only": True}
    if source.file_format == "gguf":
        kwargs["gguf_file"] = source.path.name
    where = str(source.path)
    try:
        with quiet_loading():
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(source.load_dir), **kwargs)
    except Exception as exc:  # transformers raises many types for unreadable tokenizers
        raise InputError(f"{where}: cannot load the tokenizer ({_short(exc)})", param=source.param) from None
    torch_dtype = getattr(torch, dtype)
    model = None
    for attn in ("sdpa", "eager"):
        try:
            with quiet_loading():
                model = transformers.AutoModelForCausalLM.from_pretrained(
                    str(source.load_dir), dtype=torch_dtype, attn_implementation=attn, **kwargs)
            break
        except ValueError as exc:
            if attn == "eager" or "attn" not in str(exc).lower() and "sdpa" not in str(exc).lower():
                raise InputError(f"{where}: cannot load the model ({_short(exc)})", param=source.param) from None
        except Exception as exc:
            raise InputError(f"{where}: cannot load the model ({_short(exc)})", param=source.param) from None
    try:
        model = model.to(device)
    except Exception as exc:
        raise InputError(f"cannot move the model to '{device}' ({_short(exc)})", param="device") from None
    model.eval()
    check_settings(source, getattr(model, "generation_config", None), tokenizer)
    out = model.get_output_embeddings()
    vocab_out = int(out.weight.shape[0]) if out is not None else int(model.config.get_text_config().vocab_size)
    return LoadedModel(source, model, tokenizer, vocab_out)


#: The generation settings a model directory's ``generation_config.json`` may give (transformers'
#: ``GenerationConfig``, which checks none of their types), by the kind of value each holds (None always allowed).
GENERATION_SETTINGS: dict[str, tuple[str, ...]] = {
    "token ids": ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "forced_bos_token_id",
                  "forced_eos_token_id"),
    "bool": ("do_sample", "use_cache", "output_attentions", "output_hidden_states", "output_scores", "output_logits",
             "return_dict_in_generate", "renormalize_logits", "remove_invalid_values"),
    "count": ("max_length", "max_new_tokens", "min_length", "min_new_tokens", "num_beams", "top_k",
              "num_return_sequences", "no_repeat_ngram_size"),
    "number": ("temperature", "top_p", "min_p", "typical_p", "repetition_penalty", "length_penalty"),
}


_SETTING_WORDS = {"token ids": "a token id (a whole number >= 0) or a list of them", "bool": "true or false",
                  "count": "a whole number >= 0", "number": "a number"}


def _setting_ok(kind: str, value: Any) -> bool:
    if value is None:
        return True
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "token ids":
        values = value if isinstance(value, (list, tuple)) else [value]
        return bool(values) and all(type(v) is int and v >= 0 for v in values)
    if kind == "count":
        return type(value) is int and value >= 0
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_settings(source: ModelSource, generation: Any, tokenizer: Any) -> None:
    """Refuse a model directory whose ``generation_config.json`` is not a JSON object or gives a setting of
    :data:`GENERATION_SETTINGS` a value of another kind, or whose tokenizer's ``model_max_length`` is not a number:
    transformers loads them without a word and fails (or decodes otherwise) later.

    Raises: InputError naming the file, the key and the value, with the model's parameter.
    """
    if source.file_format != "dir":
        return
    path = source.path / "generation_config.json"
    if path.is_file():
        try:
            doc = json.loads(path.read_bytes())
        except (OSError, ValueError, RecursionError) as exc:
            raise InputError(f"{path}: not a JSON file ({_short(exc)})", param=source.param) from None
        if not isinstance(doc, dict):
            raise InputError(f"{path}: expected a JSON object", param=source.param)
        for kind, names in GENERATION_SETTINGS.items():
            for name in names:
                value = getattr(generation, name, None) if generation is not None else doc.get(name)
                if not _setting_ok(kind, doc.get(name)) or not _setting_ok(kind, value):
                    raise InputError(f"{path}: key '{name}' must be {_SETTING_WORDS[kind]} (value "
                                     f"{str(doc.get(name))[:40]!r})", param=source.param)
    limit = getattr(tokenizer, "model_max_length", None)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float))):
        raise InputError(f"{source.path / 'tokenizer_config.json'}: key 'model_max_length' must be a number (value "
                         f"{str(limit)[:40]!r})", param=source.param)


#: Layer types whose KV cache can be cropped after a rejected draft (others keep recurrent state).
ROLLBACK_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")


def check_rollback(loaded: LoadedModel) -> None:
    """Refuse models with layers whose state cannot be rolled back after a rejection (linear
    attention, Mamba-style hybrids: ``config.layer_types`` outside :data:`ROLLBACK_LAYER_TYPES`).

    Raises: InputError naming the model's parameter, the model and the layer type.
    """
    cfg = loaded.model.config.get_text_config()
    bad = sorted({str(t) for t in (getattr(cfg, "layer_types", None) or [])} - set(ROLLBACK_LAYER_TYPES))
    if bad:
        raise InputError(f"{loaded.source.path}: layers of type '{bad[0]}' keep a recurrent state that cannot "
                         f"be rolled back after a rejected draft; only attention models are supported",
                         param=loaded.source.param)


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
    raise InputError(f"{draft.source.path}: tokenizer differs from the target's (vocabularies "
                     f"of {len(tv)} vs {len(dv)} tokens; id {i} is {t_by_id.get(i)!r} vs {d_by_id.get(i)!r}); "
                     f"a draft model must share the target's tokenizer", param=draft.source.param)


def eos_ids(loaded: LoadedModel) -> set[int]:
    """End-of-sequence ids: the generation config's ``eos_token_id`` (int or list) and the tokenizer's."""
    ids: set[int] = set()
    gen = getattr(loaded.model, "generation_config", None)
    for value in (getattr(gen, "eos_token_id", None), getattr(loaded.tokenizer, "eos_token_id", None)):
        if value is None:
            continue
        ids.update(int(v) for v in (value if isinstance(value, (list, tuple)) else [value]))
    return ids
