"""EAGLE-3-style draft heads (Li et al. 2025, arXiv 2503.01840; trees as EAGLE-2, arXiv 2406.16858):
``--draft-eagle DIR``.

A small head reads the target's own hidden states and drafts from them. What it computes follows the
authors' code (SafeAILab/EAGLE, ``eagle/model/cnets.py``: ``Model`` and ``LlamaDecoderLayeremb``) and
SGLang's trainer (sgl-project/SpecForge, ``specforge/modeling/draft/llama3_eagle.py``:
``LlamaForCausalLMEagle3``), whose checkpoints share one layout.

The head, for head position t (Llama-style RMSNorm and SiLU MLP, rotary position t):

* ``g_t`` = concat(low, mid, high) (3 H_t): the target's hidden states at text position t, the outputs
  of three decoder layers. The layers: ``eagle_config.eagle_aux_hidden_state_layer_ids`` of the head's
  ``config.json`` (SpecForge, SGLang) when given, else the authors' default, the inputs of layers 2,
  N // 2 and N - 3 of an N-layer target (= the outputs of layers 1, N // 2 - 1 and N - 4);
  ``f_t = fc(g_t)`` (3 H_t -> H, no bias);
* ``e_t`` = the embedding of token x_{t+1} (the head's ``embed_tokens.weight`` when the file has it,
  else the target's input embeddings, as the authors' ``load_emb`` does);
* the one decoder layer ``midlayer``: ``a = concat(input_layernorm(e_t), hidden_norm(f_t))`` (2 H);
  ``h = f_t + o_proj(attention(q_proj(a), k_proj(a), v_proj(a)))`` (q/k/v projections from 2 H,
  grouped-query attention over the head's own KV cache, causal); ``out_t = h +
  mlp(post_attention_layernorm(h))``;
* ``lm_head(norm(out_t))``: logits over the draft vocabulary (``draft_vocab_size`` D), the distribution
  of x_{t+2}. Draft id d is target id ``d + d2t[d]``; on the target's vocabulary the draft
  distribution is the softmax over those ids, every other token probability 0 (its logit -inf).

Drafting (as the authors' ``topK_genrate``): head positions 0..L-2 of a text of L tokens read the
target's features (the accepted text); their keys and values are the head's cache, kept across
blocks. The first draft comes from ``out_{L-2}``; a later draft step reads the head's own output
instead of ``f`` (no ``fc``): input (out of the previous step, the drafted token) at the next position.
A tree node's input is (its parent's output, its token) at position L - 2 + depth, attending to the
cache and its ancestors (EAGLE-2's tree attention). The drafted steps' keys and values are dropped
after the block: the accepted tokens are fed again with the target's features (as EAGLE does).
A one-token text (no target feature yet) reads a zero feature at position 0.

Features come from forward hooks on the target (:class:`_Capture`): the outputs of the three layers
of every target pass, with its ids, positions and attention mask, are kept for the last pass; a
drafter row takes, for each text position, the column whose token and visible tokens (its
ancestors: the mask's new-token part) all equal the text's (so a tree pass gives the accepted path's
features, a chain pass the accepted prefix's). Llama-like targets (``model.model.layers``) on the
torch backend only.

Checkpoint (a directory): ``config.json`` with ``hidden_size``, ``num_attention_heads``,
``num_key_value_heads``, ``intermediate_size``, ``rms_norm_eps``, ``hidden_act``, ``vocab_size``,
``draft_vocab_size``, ``rope_theta``/``rope_scaling`` (or ``rope_parameters``),
``max_position_embeddings``, optionally ``head_dim``, ``target_hidden_size`` and ``eagle_config``;
weights ``model.safetensors`` (or the PyTorch ``pytorch_model.bin``) with the tensors of
:data:`evolve.engine.eagle_head.HEAD_TENSORS` (``d2t``/``t2d`` optional when D equals the vocabulary, ``embed_tokens.weight``
optional); the checkpoint and the head's computation are :mod:`evolve.engine.eagle_head`.
"""
from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from evolve.engine.clock import synchronize
from evolve.engine.distributions import sample_index
from evolve.engine.drafter_base import Drafter, DrafterOption, EngineFamily, _stack, draft_confidence, target_layers
from evolve.engine.eagle_head import PARAM, EagleConfig, EagleHead, default_layers, load_head_weights
from evolve.files.digest import sha256_file
from evolve.errors import InputError


@dataclass
class _Pass:
    """One target forward, as captured: ids and positions long (B, T), ``vis`` bool (B, T, T) (which new columns
    each column sees; None: a plain causal pass without padding), the three layers' outputs (B, T, H_t) each,
    and its serial number."""

    ids: Any
    pos: Any
    vis: Any
    feats: tuple
    serial: int


class _Capture:
    """Forward hooks on the target keeping its last pass (:class:`_Pass`); removed with :meth:`remove`."""

    def __init__(self, model, layers: Sequence[int]):
        self.last: _Pass | None = None
        self.serial = 0
        self._inputs: tuple = (None, None, None)
        self._parts: dict[int, Any] = {}
        self._n = len(layers)
        blocks = model.model.layers
        self.handles = [model.register_forward_pre_hook(self._pre, with_kwargs=True),
                        model.register_forward_hook(self._post)]
        for slot, i in enumerate(layers):
            self.handles.append(blocks[i].register_forward_hook(self._layer_hook(slot)))

    def _pre(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self._inputs = (ids, kwargs.get("position_ids"), kwargs.get("attention_mask"))
        self._parts = {}

    def _layer_hook(self, slot: int):
        def hook(module, args, output):
            self._parts[slot] = output[0] if isinstance(output, tuple) else output
        return hook

    def _post(self, module, args, output):
        import torch

        self.serial += 1
        ids, pos, mask = self._inputs
        self._inputs = (None, None, None)
        if ids is None or len(self._parts) != self._n:
            self.last = None
            return
        T = int(ids.shape[1])
        if pos is None:
            pos = torch.arange(T, device=ids.device)[None].expand(ids.shape[0], -1)
        vis = None
        if mask is not None and getattr(mask, "dim", lambda: 0)() == 4:
            vis = mask[:, 0, :, mask.shape[-1] - T:] == 0
        elif mask is not None:
            self.last = None
            return
        self.last = _Pass(ids, pos, vis, tuple(self._parts[s] for s in range(self._n)), self.serial)
        self._parts = {}

    def remove(self) -> None:
        """Remove the hooks."""
        for h in self.handles:
            h.remove()
        self.handles = []


def _grow(buf, n: int, dim: int):
    """``buf`` with room for ``n`` entries along ``dim`` (capacity doubled when it is short)."""
    if buf.shape[dim] >= n:
        return buf
    shape = list(buf.shape)
    shape[dim] = max(n, 2 * shape[dim], 16)
    new = buf.new_zeros(shape)
    new.narrow(dim, 0, buf.shape[dim]).copy_(buf)
    return new


class _Row:
    """A text's head state: ``tokens`` the text it describes; ``feats`` (n_feats, H) the projected target features
    of text positions 0..n_feats-1; the cache of head positions 0..S-1 (``k``, ``v`` (H_kv, S, d), ``outs`` (S, H));
    ``pending`` a captured pass (and the row of it, and the text length it may fill up to) not read yet."""

    def __init__(self, head: EagleHead, tokens: Sequence[int]):
        import torch

        c, dev, dt = head.config, head.device, head.dtype
        self.tokens = list(tokens)
        self.feats = torch.zeros((0, c.hidden), dtype=dt, device=dev)
        self.n_feats = 0
        self.k = torch.zeros((c.kv_heads, 0, c.head_dim), dtype=dt, device=dev)
        self.v = torch.zeros((c.kv_heads, 0, c.head_dim), dtype=dt, device=dev)
        self.outs = torch.zeros((0, c.hidden), dtype=dt, device=dev)
        self.S = 0
        self.pending: tuple | None = None
        self.tree: dict | None = None

    def keep(self, n: int) -> None:
        """Keep what depends only on the first ``n`` tokens of the text."""
        self.S = max(0, min(self.S, n - 1))
        self.n_feats = min(self.n_feats, n)
        del self.tokens[n:]
        self.tree = None


class EagleRun:
    """The runner the tree harvest calls (``prefill``, ``tree``, ``seconds``) for an :class:`EagleDrafter`:
    its head state of the tree harvest's one text, on the drafter's own cache."""

    def __init__(self, drafter: "EagleDrafter"):
        self.drafter = drafter
        self.seconds = 0.0
        self.state: _Row | None = None

    def prefill(self, ids: Sequence[int]):
        """Start a text whose first ``len(ids)`` tokens are ``ids`` (the target has just prefilled them): takes their
        features; returns an empty cache (no layers), so the caller's cache only counts the tokens."""
        self.state = self.drafter._new_row(ids)
        return ()

    def tree(self, kv, context: Sequence[int], parents: Sequence[int], tokens: Sequence[int]):
        """The head's distributions over a draft tree, as :meth:`evolve.engine.runner.Runner.tree` gives the target's.

        The text is the ``kv.lengths[0]`` tokens this runner was given before plus ``context`` (its last token the
        root); ``kv`` is only read. Node i (parent ``parents[i]``, -1 the root; token ``tokens[i]``) is at head
        position L - 2 + depth (module doc). Nodes already computed by an earlier call for the same text and a
        tree this one extends are reused.

        Returns: logits (n + 1, V) in the head's dtype: row 0 the root's, row 1 + i after node i (-inf outside
        the draft vocabulary). Raises ValueError for no context, lengths that differ or a parent outside -1..i-1,
        RuntimeError before :meth:`prefill` or when the target's features of the text are missing.
        """
        if self.state is None:
            raise RuntimeError("EagleRun.tree before prefill")
        if len(context) < 1:
            raise ValueError("EagleRun.tree needs at least one context token (the last accepted token)")
        if len(parents) != len(tokens):
            raise ValueError(f"EagleRun.tree: {len(parents)} parents for {len(tokens)} tokens")
        for i, p in enumerate(parents):
            if not -1 <= int(p) < i:
                raise ValueError(f"EagleRun.tree: node {i} has parent {p} (needs -1 <= parent < {i})")
        st = self.state
        ctx = st.tokens[:kv.lengths[0]] + [int(t) for t in context]
        synchronize(self.drafter.head.device)
        t0 = time.perf_counter()
        try:
            out = self.drafter._tree_logits(st, ctx, [int(p) for p in parents], [int(t) for t in tokens])
            synchronize(self.drafter.head.device)
            return out
        finally:
            self.seconds += time.perf_counter() - t0


class EagleDrafter(Drafter):
    """An EAGLE-3-style head on the target's hidden states (module doc), with its own KV cache per text."""

    name = "eagle"
    family = EngineFamily.EAGLE_HEAD
    field = "eagle"
    option = DrafterOption("--draft-eagle", "DIR",
                           "EAGLE-3 draft head: a directory in the published layout (config.json, model.safetensors "
                           "or pytorch_model.bin) reading the target's hidden states (Llama-like targets).")
    unsupported = {"llama_cpp": "an EAGLE-3 head reads the target's hidden states, which the llama.cpp backend "
                                "does not expose"}
    grows_trees = True

    @classmethod
    def check_value(cls, value) -> None:
        if not Path(str(value)).expanduser().is_dir():
            raise InputError(f"{value}: no such directory (an EAGLE-3 head directory)", param=PARAM)

    @classmethod
    def build(cls, target, draft, value, vocab, device):
        return cls(target, value, vocab, device)

    def __init__(self, target, path: str, vocab: int, device: str):
        """Load the head in ``path`` for ``target`` (a :class:`evolve.engine.models.LoadedModel`), V = ``vocab``.

        Raises InputError (``eagle``) for an unreadable head, a target that is not Llama-like, layers it does not
        have, a hidden size that differs from the head's ``target_hidden_size``, or an embedding that does not fit.
        """
        directory = Path(path).expanduser().resolve()
        self.path = directory
        self.config = EagleConfig.read(directory / "config.json")
        tensors, weights = load_head_weights(directory)
        n = target_layers(target, PARAM)
        layers = self.config.layers if self.config.layers is not None else default_layers(n)
        if len(set(layers)) != 3 or not all(0 <= i < n for i in layers):
            raise InputError(f"reads target layers {list(layers)}: needs three distinct layers of the target's {n} "
                             f"(0..{n - 1}); give eagle_config.eagle_aux_hidden_state_layer_ids", param=PARAM)
        model = target.model
        tgt_hidden = int(model.get_input_embeddings().weight.shape[1])
        if tgt_hidden != self.config.target_hidden:
            raise InputError(f"the head reads hidden states of size {self.config.target_hidden}, the target's are "
                             f"{tgt_hidden}", param=PARAM)
        embed = tensors.get("embed_tokens.weight")
        self.own_embedding = embed is not None
        if embed is None:
            embed = model.get_input_embeddings().weight.detach()
        dtype = next(model.parameters()).dtype
        self.head = EagleHead(self.config, tensors, embed, vocab, dtype, device, str(weights))
        self.layers = tuple(int(i) for i in layers)
        self.n_layers = n
        self.vocab = vocab
        self.hashes = {p.name: sha256_file(p) for p in (directory / "config.json", weights)}
        self.capture = _Capture(model, self.layers)
        self._claimed = 0
        self.rows: dict[int, _Row] = {}
        weakref.finalize(self, self.capture.remove)
        self.run = EagleRun(self)

    def settings(self) -> dict[str, Any]:
        return {"kind": self.name, "path": str(self.path), "sha256": self.hashes, "target_layers": list(self.layers),
                "draft_vocab_size": self.config.draft_vocab, "hidden_size": self.config.hidden,
                "embedding": "head" if self.own_embedding else "target"}

    # --- features -------------------------------------------------------------------------------------------

    def _fresh(self) -> _Pass | None:
        """The target's last pass if no row has claimed it yet (and mark it claimed)."""
        last = self.capture.last
        if last is None or last.serial <= self._claimed:
            return None
        self._claimed = last.serial
        return last

    def _new_row(self, ctx: Sequence[int]) -> _Row:
        """A head state for a text whose target cache was just prefilled with ``ctx`` minus nothing read yet."""
        st = _Row(self.head, ctx)
        last = self._fresh()
        if last is not None and last.ids.shape[0] == 1:
            st.pending = (last, 0, len(st.tokens))
        return st

    def _read(self, st: _Row, ctx: Sequence[int]) -> None:
        """Take the features of the row's pending pass that hold for ``ctx`` (module doc), then forget the pass."""
        import torch

        if st.pending is None:
            return
        cap, r, limit = st.pending
        st.pending = None
        n = min(len(ctx), limit)
        if n <= st.n_feats:
            return
        ids, pos = cap.ids[r].cpu(), cap.pos[r].cpu()
        text = torch.tensor(list(ctx), dtype=torch.long)
        match = (pos < len(ctx)) & (ids == text[pos.clamp(max=len(ctx) - 1)])
        if cap.vis is None:
            ok = torch.cumprod(match.to(torch.long), 0).to(torch.bool)
        else:
            vis = cap.vis[r].cpu()
            ok = vis.diagonal() & ~(vis & ~match[None, :]).any(dim=1)
        ok &= pos < n
        column = {int(pos[j]): j for j in torch.nonzero(ok, as_tuple=False)[:, 0].tolist()}
        take, p = [], st.n_feats
        while p in column:
            take.append(column[p])
            p += 1
        if not take:
            return
        g = torch.cat([f[r, take] for f in cap.feats], dim=-1)
        st.feats = _grow(st.feats, p, 0)
        st.feats[st.n_feats:p] = self.head.project(g)
        st.n_feats = p

    def _sync(self, st: _Row, ctx: Sequence[int]) -> None:
        """Make the row describe the text ``ctx``: read its pending pass, drop what a different prefix computed."""
        self._read(st, ctx)
        common = 0
        for a, b in zip(st.tokens, ctx):
            if a != b:
                break
            common += 1
        if common < len(st.tokens):
            st.keep(common)
        st.tokens = list(ctx)

    def _feed(self, st: _Row, upto: int) -> None:
        """Compute head positions S..upto-1 from the target's features (they become the row's cache)."""
        import torch

        S = st.S
        if upto <= S:
            return
        if st.n_feats < upto:
            raise RuntimeError(f"EAGLE head: the target's hidden states of text position {st.n_feats} are missing "
                               f"(the text has {len(st.tokens)} tokens)")
        dev = self.head.device
        toks = torch.tensor(st.tokens[S + 1:upto + 1], dtype=torch.long, device=dev)
        out, k, v = self.head.layer(toks, st.feats[S:upto], torch.arange(S, upto, device=dev),
                                    st.k[:, :S], st.v[:, :S], None)
        st.k, st.v = _grow(st.k, upto, 1), _grow(st.v, upto, 1)
        st.outs = _grow(st.outs, upto, 0)
        st.k[:, S:upto], st.v[:, S:upto], st.outs[S:upto] = k, v, out
        st.S = upto

    def _root(self, st: _Row):
        """(output (1, H), its position, extra keys, extra values) at the last token of the row's text: the cached
        output of head position L - 2, or for a one-token text a zero feature at position 0 (not cached)."""
        import torch

        L = len(st.tokens)
        self._feed(st, L - 1)
        c, dev = self.head.config, self.head.device
        if L >= 2:
            empty = st.k[:, :0]
            return st.outs[L - 2:L - 1], L - 2, empty, empty
        zero = torch.zeros((1, c.hidden), dtype=self.head.dtype, device=dev)
        out, k, v = self.head.layer(torch.tensor(st.tokens[:1], device=dev), zero,
                                    torch.zeros(1, dtype=torch.long, device=dev), st.k[:, :0], st.v[:, :0], None)
        return out, 0, k, v

    # --- the engine's calls ---------------------------------------------------------------------------------

    def start(self, engine, batch, row):
        self.rows[row] = self._new_row(batch.rows[row].ctx)

    def propose(self, engine, batch, ks, keep=None):
        out: list = []
        synchronize(self.head.device)
        t0 = time.perf_counter()
        try:
            for i, k in enumerate(ks):
                state = batch.rows[i]
                st = self.rows.get(i)
                if state is None or st is None:
                    out.append(([], None, np.zeros(0)))
                    continue
                self._sync(st, state.ctx)
                out.append(self._chain(engine, st, state.rng, i, int(k), keep) if k else ([], None, np.zeros(0)))
            synchronize(self.head.device)
        finally:
            self.run.seconds += time.perf_counter() - t0
        return out

    def _chain(self, engine, st: _Row, rng, row: int, k: int, keep):
        """Draft up to ``k`` tokens after the row's text (one uniform of ``rng`` each); as :meth:`Drafter.propose`."""
        import torch

        head, dev = self.head, self.head.device
        hid, base, spec_k, spec_v = self._root(st)
        cached_k, cached_v = torch.cat([st.k[:, :st.S], spec_k], 1), torch.cat([st.v[:, :st.S], spec_v], 1)
        drafts, dists, ents, probs, tops = [], [], [], [], []
        while True:
            q, h = engine.distributions(head.logits(hid))
            x = sample_index(q[0], rng.random())
            drafts.append(x)
            dists.append(q[0])
            ents.append(h[0])
            done = x in engine.eos or len(drafts) >= k
            if keep is not None and not done:
                prob, top = draft_confidence(q[0], x)
                probs.append(prob)
                tops.append(top)
                done = not keep(row, probs, tops, ents)
            if done:
                break
            pos = torch.tensor([base + len(drafts)], device=dev)
            hid, k1, v1 = head.layer(torch.tensor([x], device=dev), hid, pos, cached_k, cached_v, None)
            cached_k, cached_v = torch.cat([cached_k, k1], 1), torch.cat([cached_v, v1], 1)
        return drafts, _stack(dists), np.asarray(ents)

    def commit(self, engine, batch, valid):
        last = self._fresh()
        for i, n in enumerate(valid):
            st = self.rows.get(i)
            if n is None or st is None:
                continue
            if batch.rows[i] is None:
                del self.rows[i]
                continue
            self._read(st, batch.rows[i].ctx)  # a pass no propose has read yet
            st.keep(n)
            if last is not None and last.ids.shape[0] == len(valid):
                st.pending = (last, i, n)

    def _tree_logits(self, st: _Row, ctx: list[int], parents: list[int], tokens: list[int]):
        """The body of :meth:`EagleRun.tree` (same arguments, the text ``ctx``)."""
        import torch

        last = self._fresh()
        self._sync(st, ctx)
        if last is not None and last.ids.shape[0] == 1:
            st.pending = (last, 0, len(ctx))
            self._read(st, ctx)
        head, dev = self.head, self.head.device
        hid, base, extra_k, extra_v = self._root(st)
        memo = st.tree
        if memo is None or memo["len"] != len(ctx) or memo["parents"] != parents[:len(memo["parents"])] \
                or memo["tokens"] != tokens[:len(memo["tokens"])]:
            memo = {"len": len(ctx), "parents": [], "tokens": [], "out": {}, "order": [], "k": [], "v": [],
                    "depth": []}
        for i in range(len(memo["depth"]), len(tokens)):
            memo["depth"].append(1 if parents[i] < 0 else memo["depth"][parents[i]] + 1)
        fixed_k, fixed_v = torch.cat([st.k[:, :st.S], extra_k], 1), torch.cat([st.v[:, :st.S], extra_v], 1)
        F = int(fixed_k.shape[1])
        new = list(range(len(memo["tokens"]), len(tokens)))
        while new:  # by depth: a node's input is its parent's output
            d = min(memo["depth"][i] for i in new)
            group = [i for i in new if memo["depth"][i] == d]
            new = [i for i in new if memo["depth"][i] != d]
            M = len(memo["order"])
            slot = {node: F + m for m, node in enumerate(memo["order"])}
            keys = torch.cat([fixed_k] + memo["k"], 1)
            values = torch.cat([fixed_v] + memo["v"], 1)
            allowed = torch.zeros((len(group), F + M + len(group)), dtype=torch.bool, device=dev)
            allowed[:, :F] = True
            for g, i in enumerate(group):
                p = parents[i]
                while p >= 0:
                    allowed[g, slot[p]] = True
                    p = parents[p]
                allowed[g, F + M + g] = True
            inp = torch.cat([hid if parents[i] < 0 else memo["out"][parents[i]] for i in group], 0)
            pos = torch.full((len(group),), base + d, dtype=torch.long, device=dev)
            out, k, v = head.layer(torch.tensor([tokens[i] for i in group], device=dev), inp, pos, keys, values,
                                   allowed)
            memo["k"].append(k)
            memo["v"].append(v)
            for g, i in enumerate(group):
                memo["out"][i] = out[g:g + 1]
                memo["order"].append(i)
        memo["parents"], memo["tokens"] = list(parents), list(tokens)
        st.tree = memo
        return head.logits(torch.cat([hid] + [memo["out"][i] for i in range(len(tokens))], 0))


__all__ = ["EagleDrafter", "EagleRun"]
