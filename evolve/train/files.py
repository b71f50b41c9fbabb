"""The files of a ``train-drafter`` run, read as data only and checked against the run before they are used.

``OUT/data/texts.json`` (the target's responses, JSON), ``OUT/data/features.pt`` (the target's features of those
texts) and ``OUT/train_state.pt`` (the optimiser's checkpoint) are written by :mod:`evolve.train.eagle`. Reading
them runs no code whoever wrote them: the ``.pt`` files are read with ``torch.load(weights_only=True)``, whose
unpickler builds only tensors and plain containers (dict, list, tuple, str, numbers, None) and refuses any other
object, so a file whose pickle would call a function (``__reduce__``) is refused unread. Then every value is
checked by type, shape and sense (counts within range, numbers finite) before training uses it; each refusal is one
line (:class:`evolve.errors.InputError`, parameter ``out``) naming the file and the key.

The features are bound to the data they were computed from: ``features.pt`` holds ``{"digest", "features"}``, the
digest (:func:`data_digest`) the SHA-256 of the texts, the settings they were made with (``texts.json``'s key),
the target layers read and the draft vocabulary, so features of another run (or of texts made again) are refused
rather than trained on. A features file of an earlier version (a bare list) is checked by its counts: one entry per
text, each of the text's length. ``train_state.pt`` records the same digest (a state of an earlier version has
none and is checked by its shapes).
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from evolve.errors import InputError
from evolve.files.tensors import tensor_problem

PARAM = "out"


def _refuse(path: Path, text: str) -> InputError:
    return InputError(f"{path}: {text}", param=PARAM)


def _reason(exc: BaseException) -> str:
    """One line of an exception's text (the first line, at most 160 characters)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[0] if lines else type(exc).__name__
    return text[:160]


def load_pt(path: Path, what: str) -> Any:
    """The contents of the torch file ``path`` (``what`` names it in messages), read as data only.

    ``torch.load(weights_only=True)``: only tensors and plain containers are built; a pickle naming any other
    callable or class is refused without running it. Raises InputError (one line naming the file) for an empty,
    damaged or foreign file, or one holding objects other than tensors and plain data.
    """
    import pickle
    import warnings

    import torch

    try:
        if path.stat().st_size == 0:
            raise _refuse(path, f"empty file (not a {what} of train-drafter); delete it to make it again")
        with warnings.catch_warnings():  # torch warns about pickle protocols it reads anyway
            warnings.simplefilter("ignore")
            return torch.load(str(path), map_location="cpu", weights_only=True)
    except InputError:
        raise
    except pickle.UnpicklingError as exc:
        if "weights_only" in str(exc) or "Weights only load failed" in str(exc):
            raise _refuse(path, f"holds Python objects other than tensors and plain data (refused unread: loading "
                                f"it could run code); not a {what} of train-drafter") from None
        raise _refuse(path, f"damaged or not a {what} of train-drafter ({_reason(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - torch raises many types for damaged files
        raise _refuse(path, f"damaged or not a {what} of train-drafter ({type(exc).__name__}: {_reason(exc)})") \
            from None


def read_texts(path: Path, key: dict, vocab: int) -> list[dict]:
    """The texts of ``OUT/data/texts.json`` made with the settings ``key`` (:meth:`TrainSettings.data_key` plus the
    prompts' SHA-256 and the target), each ``{"ids": [int, ...], "prompt_len": int}`` with ids in 0..``vocab``-1
    and 1 <= prompt_len <= len(ids).

    Raises InputError naming the file (and the key, the text) for an empty, damaged or foreign file, texts of
    other settings, or a text that does not fit the target.
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _refuse(path, f"cannot read the texts ({_reason(exc)})") from None
    if not raw.strip():
        raise _refuse(path, "empty file (not the texts of train-drafter); delete it to make the texts again")
    try:
        saved = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise _refuse(path, f"not valid JSON ({_reason(exc)}); delete it to make the texts again") from None
    if not isinstance(saved, dict) or not isinstance(saved.get("key"), dict) or not isinstance(saved.get("texts"),
                                                                                              list):
        raise _refuse(path, "not the texts of train-drafter (expected an object with 'key' and 'texts')")
    if saved["key"] != key:
        raise _refuse(path, f"made with other settings ({saved['key']} then, {key} now); choose another output "
                            f"directory")
    texts = saved["texts"]
    if not texts:
        raise _refuse(path, "key 'texts' holds no text; delete the file to make the texts again")
    for i, t in enumerate(texts):
        where = f"key 'texts[{i}]'"
        if not isinstance(t, dict) or set(t) != {"ids", "prompt_len"}:
            raise _refuse(path, f"{where} must be an object with 'ids' and 'prompt_len'")
        ids, plen = t["ids"], t["prompt_len"]
        if not isinstance(ids, list) or not ids or not all(type(x) is int and 0 <= x < vocab for x in ids):
            raise _refuse(path, f"{where}.ids must be a non-empty list of token ids in 0..{vocab - 1}")
        if type(plen) is not int or not 1 <= plen <= len(ids):
            raise _refuse(path, f"{where}.prompt_len is {plen!r}, expected a whole number in 1..{len(ids)}")
    return texts


def data_digest(key: dict, texts: list[dict], layers, vocab_ids) -> str:
    """SHA-256 (hex) binding the features to what they are computed from: the texts' settings ``key``, the
    ``texts``, the target ``layers`` read and the draft vocabulary ``vocab_ids`` (int64 (D,))."""
    doc = {"key": key, "texts": texts, "layers": [int(i) for i in layers],
           "vocab_ids": [int(i) for i in list(vocab_ids)]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def _finite(tensor) -> bool:
    import torch

    return bool(torch.isfinite(tensor).all())


def read_features(path: Path, digest: str, texts: list[dict], width: int, draft: int) -> list[dict]:
    """The features of ``OUT/data/features.pt``: one ``{"g": float (N, width), "z": float (N, draft)}`` per text
    (N the text's length), computed from the data of ``digest`` (:func:`data_digest`).

    Raises InputError naming the file and the key for features of other data, a wrong count or shape, a
    non-float or non-finite tensor, or a damaged or foreign file (:func:`load_pt`).
    """

    data = load_pt(path, "features file")
    if isinstance(data, dict):
        if set(data) != {"digest", "features"} or not isinstance(data["digest"], str):
            raise _refuse(path, "not a features file of train-drafter (expected the keys 'digest' and 'features')")
        if data["digest"] != digest:
            raise _refuse(path, "features of other data (computed from other texts, layers or draft vocabulary than "
                                "texts.json and the settings give now); delete it to compute them again")
        features = data["features"]
    else:
        features = data  # an earlier version's bare list: checked by its counts and shapes below
    if not isinstance(features, list) or len(features) != len(texts):
        n = len(features) if isinstance(features, list) else type(features).__name__
        raise _refuse(path, f"key 'features' holds {n} entries, but texts.json has {len(texts)} texts; delete it to "
                            f"compute the features again")
    for i, (f, t) in enumerate(zip(features, texts)):
        where = f"key 'features[{i}]'"
        if not isinstance(f, dict) or set(f) != {"g", "z"}:
            raise _refuse(path, f"{where} must hold the tensors 'g' and 'z'")
        n = len(t["ids"])
        for name, cols in (("g", width), ("z", draft)):
            v = f[name]
            problem = tensor_problem(v)
            if problem is not None:
                raise _refuse(path, f"{where}.{name} {problem}; it must be a float tensor")
            if tuple(v.shape) != (n, cols):
                raise _refuse(path, f"{where}.{name} has shape {tuple(v.shape)}, expected {(n, cols)} (the text's "
                                    f"{n} tokens); delete the file to compute the features again")
            if not _finite(v):
                raise _refuse(path, f"{where}.{name} holds a NaN or infinite value")
    return features


STATE_KEYS = ("step", "params", "optimizer", "window", "fingerprint")


def read_state(path: Path, fingerprint: dict, shapes: dict[str, tuple], digest: str, max_steps: int,
               hyper: dict | None = None) -> dict:
    """The checkpoint ``OUT/train_state.pt``, checked against the run: its ``fingerprint`` (settings and head
    config), its data ``digest`` (when it records one), ``params`` (name -> float tensor of ``shapes``, finite),
    ``step`` (a whole number in 0..``max_steps``, the most steps a run may ask for), ``window`` (the last [loss >= 0, agreement in [0, 1] or NaN] pairs, no more
    than the steps done) and ``optimizer`` (AdamW's state: per parameter ``step``
    at most the checkpoint's (a text without a response position makes no optimiser step), ``exp_avg`` and ``exp_avg_sq`` of the parameter's shape, finite, the second >= 0; its
    hyper-parameters, every key of its one ``param_groups`` entry but ``params``, those of ``hyper``, the optimiser the
    command builds: a checkpoint's learning rate is never taken over the command's).

    Returns the loaded dict. Raises InputError naming the file and the key.
    """

    state = load_pt(path, "checkpoint")
    if not isinstance(state, dict) or not set(STATE_KEYS) <= set(state):
        raise _refuse(path, f"not a checkpoint of train-drafter (expected the keys {', '.join(STATE_KEYS)})")
    extra = sorted(set(state) - set(STATE_KEYS) - {"digest"})
    if extra:
        raise _refuse(path, f"key '{extra[0]}' is not a key of a train-drafter checkpoint")
    if not isinstance(state["fingerprint"], dict) or state["fingerprint"] != fingerprint:
        raise _refuse(path, "a checkpoint of other settings; choose another output directory")
    if "digest" in state and state["digest"] != digest:
        raise _refuse(path, "a checkpoint trained on other data (texts.json or its features changed since); choose "
                            "another output directory")
    step = state["step"]
    if type(step) is not int or not 0 <= step <= max_steps:
        raise _refuse(path, f"key 'step' is {step!r}, expected a whole number in 0..{max_steps}")
    params = state["params"]
    if not isinstance(params, dict) or set(params) != set(shapes):
        raise _refuse(path, f"key 'params' must hold the head's tensors {', '.join(sorted(shapes))}")
    for name, shape in shapes.items():
        v = params[name]
        problem = tensor_problem(v)
        if problem is not None or tuple(v.shape) != tuple(shape):
            raise _refuse(path, f"key 'params.{name}' {problem or f'has shape {tuple(v.shape)}'}; it must be a float "
                                f"tensor of shape {tuple(shape)}")
        if not _finite(v):
            raise _refuse(path, f"key 'params.{name}' holds a NaN or infinite value")
    _check_window(path, state["window"], step)
    _check_optimizer(path, state["optimizer"], [shapes[k] for k in shapes], step)
    if hyper is not None:
        _check_hyper(path, state["optimizer"]["param_groups"][0], hyper)
    return state


def _check_hyper(path: Path, group: dict, hyper: dict) -> None:
    """The checkpoint's optimiser hyper-parameters ``group`` are the command's ``hyper`` (``params`` aside)."""
    for name, want in hyper.items():
        if name == "params":
            continue
        have = group.get(name, "missing")
        same = list(have) == list(want) if isinstance(want, (tuple, list)) and isinstance(have, (tuple, list)) \
            else type(have) is type(want) and have == want
        if not same:
            flag = " (--lr)" if name == "lr" else ""
            raise _refuse(path, f"key 'optimizer.param_groups[0].{name}' is {have!r}, but this command's optimiser "
                                f"has {want!r}{flag}: the checkpoint was not written by these settings; choose another "
                                f"output directory")


def _check_window(path: Path, window: Any, step: int) -> None:
    if not isinstance(window, list) or len(window) > step:
        raise _refuse(path, f"key 'window' must be a list of at most {step} [loss, agreement] pairs (one per step "
                            f"done, the last ones)")
    for k, pair in enumerate(window):
        ok = isinstance(pair, list) and len(pair) == 2 and all(type(x) in (int, float) for x in pair)
        if ok:
            loss, agree = float(pair[0]), float(pair[1])
            ok = math.isfinite(loss) and loss >= 0 and (agree != agree or 0.0 <= agree <= 1.0)
        if not ok:
            raise _refuse(path, f"key 'window[{k}]' is {pair!r}, expected [loss (a finite number >= 0), top-1 "
                                f"agreement (in [0, 1] or NaN)]")


def _check_optimizer(path: Path, opt: Any, shapes: list[tuple], step: int) -> None:
    import torch

    if not isinstance(opt, dict) or set(opt) != {"state", "param_groups"}:
        raise _refuse(path, "key 'optimizer' must be AdamW's state (the keys 'state' and 'param_groups')")
    groups = opt["param_groups"]
    if not isinstance(groups, list) or len(groups) != 1 or not isinstance(groups[0], dict) \
            or groups[0].get("params") != list(range(len(shapes))):
        raise _refuse(path, f"key 'optimizer.param_groups' must be one group of the {len(shapes)} head tensors")
    for name in ("lr", "eps", "weight_decay"):
        v = groups[0].get(name)
        if type(v) not in (int, float) or not math.isfinite(v) or v < 0:
            raise _refuse(path, f"key 'optimizer.param_groups[0].{name}' is {v!r}, expected a finite number >= 0")
    entries = opt["state"]
    if not isinstance(entries, dict) or (entries and set(entries) != set(range(len(shapes)))) or \
            (step > 0 and not entries):
        raise _refuse(path, f"key 'optimizer.state' must hold one entry per head tensor (0..{len(shapes) - 1})")
    for i, entry in entries.items():
        where = f"key 'optimizer.state[{i}]'"
        if not isinstance(entry, dict) or set(entry) != {"step", "exp_avg", "exp_avg_sq"}:
            raise _refuse(path, f"{where} must hold AdamW's 'step', 'exp_avg' and 'exp_avg_sq'")
        try:
            s = float(entry["step"]) if isinstance(entry["step"], (torch.Tensor, int, float)) else None
        except (TypeError, ValueError, RuntimeError, NotImplementedError):  # several values, or a meta tensor
            s = None
        if s is None or not math.isfinite(s) or s != int(s) or not 1 <= s <= step:
            raise _refuse(path, f"{where}.step is {entry['step']!r}, expected a whole number in 1..{step} (the "
                                f"checkpoint's step)")
        for name in ("exp_avg", "exp_avg_sq"):
            v = entry[name]
            problem = tensor_problem(v)
            if problem is not None or tuple(v.shape) != tuple(shapes[i]):
                raise _refuse(path, f"{where}.{name} {problem or f'has shape {tuple(v.shape)}'}; it must be a float "
                                    f"tensor of shape {tuple(shapes[i])}")
            if not _finite(v) or (name == "exp_avg_sq" and bool((v < 0).any())):
                raise _refuse(path, f"{where}.{name} holds a NaN, infinite{' or negative' if name[-2:] == 'sq' else ''}"
                                    f" value")


__all__ = ["PARAM", "STATE_KEYS", "data_digest", "load_pt", "read_features", "read_state", "read_texts"]
