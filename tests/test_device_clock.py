"""Timers around device work wait for the device: a CUDA forward pass returns before it has run, so the harvest's
forward seconds, the cost files' forward and draft times and the EAGLE head's time are read after
``torch.cuda.synchronize`` (:func:`evolve.engine.clock.synchronize`) where the device is CUDA. Checked without a GPU:
the synchronisation is observed, and a CPU run is untouched; plain generation's inputs go to the model's device."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture
def synced(monkeypatch):
    calls: list = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(str(device)))
    return calls


@pytest.mark.parametrize("device,expected", [("cpu", 0), ("cuda", 1), ("cuda:1", 1), (torch.device("cuda:0"), 1),
                                             ("meta", 0)])
def test_synchronize_waits_only_for_cuda(synced, device, expected):
    from evolve.engine.clock import synchronize

    synchronize(device)
    assert len(synced) == expected


class _Model(torch.nn.Module):
    """A model whose forward records whether the device was synchronised before it ran."""

    def __init__(self, synced):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.synced, self.before = synced, None

    def forward(self, **kwargs):
        self.before = len(self.synced)
        return "out"


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_the_runners_forward_time_is_read_after_the_device_finished(synced, device):
    from evolve.engine.runner import Runner

    model = _Model(synced)
    runner = Runner(model, 4, device)
    assert runner._forward({}) == "out"
    if device == "cuda":  # once before the clock starts (earlier work not counted), once before it is read
        assert model.before == 1 and len(synced) == 2
    else:
        assert synced == []
    assert runner.seconds >= 0


def test_plain_generation_inputs_go_to_the_models_device():
    from evolve.perf.harvest import _generate

    class Model:
        device = torch.device("meta")
        seen: list = []

        def generate(self, input_ids, attention_mask, **kwargs):
            self.seen.append((input_ids.device, attention_mask.device))
            return torch.zeros((input_ids.shape[0], input_ids.shape[1] + 2), dtype=torch.long)

    class Tok:
        pad_token_id = 0

    model = Model()
    tokens, seconds = _generate(model, Tok(), [[1, 2], [3]], 2, 2, {9}, 0)
    assert tokens == 4 and model.seen == [(torch.device("meta"), torch.device("meta"))]
