"""The verification core: every acceptance test and residual of speculative decoding, defined once.

The engine (:mod:`evolve.engine`), the harvest, the simulator (:mod:`evolve.sim`), the evaluator
(:mod:`evolve.eval`), the kinds' scorers, live decoding and the exported modules (their text is
generated from the functions here, :mod:`evolve.export`) all take their verification maths from this
package; it imports numpy and Numba only. One module per idea:

* :mod:`evolve.verification.tokenwise`: the standard rule and its residual (token-wise verification);
* :mod:`evolve.verification.block`: block verification's weights, residual masses, stopping
  probabilities and phi, and the relaxed target of relaxed block verification;
* :mod:`evolve.verification.tree`: SpecInfer's and traversal verification's acceptance on a draft tree;
* :mod:`evolve.verification.tokenwise_block`: the token-wise block expectation, expected tokens per call
  and expected damage of a block verified token by token (one recursion for every caller);
* :mod:`evolve.verification.traversal`: traversal verification of a draft tree, for the engine and the
  simulator alike;
* :mod:`evolve.verification.summation`: numpy's pairwise summation order, for Numba code whose numpy
  form is recorded.

Terms (as in vLLM's ``v1/sample/rejection_sampler.py``, whose names are given in brackets)
------------------------------------------------------------------------------------------
* **target** p and **draft** q: the target model's and the drafter's next-token distributions at one
  position, float64 (V,) over a vocabulary of V tokens, each summing to 1 (``target_probs``,
  ``draft_probs``); a block of gamma drafted positions gives float64 (gamma, V) rows, depth i the
  position of the i-th drafted token. p(x), q(x): their probabilities of the drafted token x
  (``target_prob``, ``draft_prob`` in the trace schema, float64 (n,) per record). gamma is vLLM's
  ``num_speculative_tokens``.
* **accepted** tokens: the leading drafted tokens a verification keeps (vLLM's accepted tokens);
  the first drafted token it does not keep is **rejected**, and every drafted token after it is
  discarded.
* **recovered** token: the token emitted in place of a rejected one, drawn from the residual
  (vLLM's ``recovered_token_ids``).
* **bonus** token: the token emitted after a block whose every drafted token is accepted, drawn from
  the target's p at the next position (vLLM's ``bonus_token_ids``). One target call therefore emits
  accepted + 1 tokens (this project's tokens per call, the field's mean acceptance length).
* **threshold** tau: a token-wise rule accepts the drafted token x iff u < tau, u a uniform in [0, 1)
  (``uniform_probs`` in vLLM); the **standard rule** is tau = r = min(1, p(x)/q(x)) (Leviathan et al.
  2023, arXiv 2211.17192), lossless: the emitted tokens follow p exactly.
* **residual**: the distribution a recovered token is drawn from, norm(max(0, p - q tau)) after a
  token-wise rejection (norm(max(0, p - q)) for the standard rule); block verification's
  norm(max(0, P_i p_{i+1} - q_{i+1})) after i accepted tokens, P_i the **block weight**
  (:mod:`evolve.verification.block`); on a tree, the updated target of a node whose child was rejected
  (:mod:`evolve.verification.tree`). Its unnormalised sum is the **residual mass**.
* **reach** R_k = prod_{i<k} tau_i of depth k, **expected tokens** per target call 1 + sum_k R_{k+1} and
  **expected damage** sum_k R_k e_k of a block verified token by token (e_k the depth's **excess**, max(0,
  tau_k - r_k) for a record): :mod:`evolve.verification.tokenwise_block`, whose recursion every caller runs.

Arrays are float64 unless a docstring says otherwise; token ids are int64. Functions that the
simulator's and the evaluator's Numba kernels call are ``@njit(cache=True)`` and are called from
numpy code as they are. Where a numpy caller must keep numpy's vectorised evaluation order (pairwise
sums over the vocabulary: the engine's float64 values are part of the harvested datasets), the core
holds that form too, beside the sequential one, and the tests hold the two to each other.
"""
