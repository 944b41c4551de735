"""Gradients that MemTracker files as temporaries at its peak snapshot, found and counted.

Why: MemTracker labels every tensor an op creates during backward ``Temp`` inside
``__torch_dispatch__`` and takes its peak snapshot (``_update_peak_stats``) right after that op.
A parameter's gradient is relabelled ``Gradient`` only later, when the autograd engine hands it
to the parameter's hooks (``param.register_hook`` / ``register_post_accumulate_grad_hook``,
installed by ``_track_module_params_and_buffers``); relabelling moves bytes between categories of
the *current* snapshot, never of the peak one. When the op that sets the peak produces a weight
gradient — typically the first layer of backward, with Adam's state already allocated — the
gradient is ``Temp`` in the peak snapshot forever ("gradients 0 B" at a backward peak).

The trackers below number every allocation, remember the number at which each device's peak was
taken, and when a storage that already existed at the peak is relabelled from a temporaries
category to a gradients category, count its bytes as a gradient at the peak. MemTracker's own
snapshots are left as MemTracker recorded them; the estimator moves the counted bytes.
"""

from __future__ import annotations

from typing import Any, Self
from weakref import WeakKeyDictionary

import torch
from torch.distributed._tools import mem_tracker as _mt
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed._tools.mem_tracker import MemTracker

#: ``_RefType.value`` of the categories a gradient is created as, and of the gradient ones
#: (MemTracker's and FSDPMemTracker's).
_TEMPORARY_KINDS = frozenset({"Temp"})
_GRADIENT_KINDS = frozenset({"Gradient", "Sharded Grad", "Unsharded Grad"})


class GradientAwareMemTracker(MemTracker):
    """MemTracker that also knows how many bytes of its peak snapshot were gradients in flight."""

    #: The torch tracker this one extends, as reported to the user.
    base_name = "MemTracker"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._allocations = 0
        self._born: WeakKeyDictionary[_mt._WeakRefInfo, int] = WeakKeyDictionary()
        self._peak_at: dict[torch.device, int] = {}
        self._late_gradients: dict[torch.device, int] = {}

    def late_gradient_bytes(self, device: torch.device) -> int:
        """Bytes the peak snapshot on ``device`` files as temporaries that were gradients."""
        for dev, nbytes in self._late_gradients.items():
            if dev.type == device.type and (dev.index or 0) == (device.index or 0):
                return nbytes
        return 0

    def _update_snap(self, u_type: _mt._UpdateType, winfo: _mt._WeakRefInfo,
                     old_mem_consumed: int | None = None,
                     old_reftype: _mt._RefType | None = None) -> None:
        if u_type == _mt._UpdateType.ADD:
            self._allocations += 1
            self._born[winfo] = self._allocations
        elif (u_type == _mt._UpdateType.REF and old_reftype is not None
              and old_reftype.value in _TEMPORARY_KINDS
              and winfo.reftype.value in _GRADIENT_KINDS):
            born = self._born.get(winfo)
            peak_at = self._peak_at.get(winfo.device)
            if born is not None and peak_at is not None and born <= peak_at:
                # Alive at the peak (storages are never revived) and a temporary there: nothing
                # relabels a tensor to Temp, so it kept the label it was created with.
                self._late_gradients[winfo.device] = (
                    self._late_gradients.get(winfo.device, 0) + winfo.mem_consumed)
        super()._update_snap(u_type, winfo, old_mem_consumed, old_reftype)

    def _update_peak_stats(self, peak_state: _mt._State) -> None:
        before = dict(self._peak_mem)
        super()._update_peak_stats(peak_state)
        for dev, peak in self._peak_mem.items():
            if peak != before.get(dev):
                # A new peak snapshot, taken from the current labels: nothing late in it yet.
                self._peak_at[dev] = self._allocations
                self._late_gradients[dev] = 0

    def __enter__(self) -> Self:
        super().__enter__()
        if self._depth == 1:
            # The outermost entry restarts the peak from the current snapshot (correct labels).
            for dev in self._peak_mem:
                self._peak_at[dev] = self._allocations
                self._late_gradients[dev] = 0
        return self


class GradientAwareFSDPMemTracker(GradientAwareMemTracker, FSDPMemTracker):
    """FSDPMemTracker with the same count: unsharded gradients stay ``Temp`` until the FSDP
    post-backward relabels them, long after the op that may have set the peak."""

    base_name = "FSDPMemTracker"
