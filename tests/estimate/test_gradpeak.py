"""MemTracker's peak snapshot files a weight gradient created by the peak's own op as ``Temp``;
the gradient-aware tracker counts those bytes (real tensors, torch's own MemTracker)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stormotel.estimate.gradpeak import GradientAwareMemTracker

# torch is imported when a test runs, not when every xdist worker collects the module.
CPU = "cpu"


def _peak(tracker: GradientAwareMemTracker) -> dict[str, int]:
    import torch

    snap = tracker.get_tracker_snapshot("peak")[torch.device(CPU)]
    return {getattr(k, "value", k): v for k, v in snap.items()}


def test_weight_gradient_created_at_the_peak_is_counted_as_a_gradient() -> None:
    import torch
    from torch import nn

    from stormotel.estimate.gradpeak import GradientAwareMemTracker

    cpu = torch.device(CPU)
    # y = x @ W.T with x not requiring grad: backward computes only dW (d x d). With d > batch,
    # the peak is the op that allocates dW, before W's grad hook relabels it.
    d, batch = 64, 8
    model = nn.Linear(d, d, bias=False)
    x = torch.randn(batch, d)
    tracker = GradientAwareMemTracker()
    tracker.track_external(model, x)
    with tracker:
        model(x).sum().backward()
    weight_bytes = d * d * 4
    peak = _peak(tracker)
    assert peak["Gradient"] == 0 and peak["Temp"] >= weight_bytes  # MemTracker's own view
    assert tracker.late_gradient_bytes(cpu) == weight_bytes
    # Once backward is over MemTracker itself agrees: the same bytes are a gradient.
    current = {getattr(k, "value", k): v for k, v in tracker.get_tracker_snapshot()[cpu].items()}
    assert current["Gradient"] == weight_bytes and current["Temp"] == 0


def test_gradients_relabelled_before_a_later_peak_are_not_counted_again() -> None:
    import torch
    from torch import nn

    from stormotel.estimate.gradpeak import GradientAwareMemTracker

    cpu = torch.device(CPU)
    # Two layers; the input requires grad so layer 0 computes dX (16 KiB) and dW0 (1 KiB). W1's
    # gradient is relabelled before the peak (the op allocating dW0, with dH and dX alive), so
    # the peak snapshot already files W1's as a gradient and only dW0 is late.
    w_bytes = 16 * 16 * 4
    model = nn.Sequential(nn.Linear(16, 16, bias=False), nn.Linear(16, 16, bias=False))
    x = torch.randn(256, 16, requires_grad=True)
    tracker = GradientAwareMemTracker()
    tracker.track_external(model, x)
    with tracker:
        model(x).sum().backward()
    peak = _peak(tracker)
    assert peak["Gradient"] == w_bytes  # W1's, relabelled before the peak
    assert tracker.late_gradient_bytes(cpu) == w_bytes  # W0's, still Temp in the snapshot
    assert peak["Temp"] == 2 * 256 * 16 * 4 + w_bytes  # dH, dX and the late dW0
