"""Run training steps under PyTorch's MemTracker and turn what it saw into an :class:`Estimate`.

Fake mode (the default) builds the model inside ``FakeTensorMode``: every tensor has a shape,
dtype and device but no storage, so a model far larger than this machine's memory can be
estimated on a laptop CPU. Real mode runs the same steps with real tensors and additionally
measures the allocator's own peak over the iterations, so the tracker can be checked against it
("tracker accuracy"): ``torch.cuda.max_memory_allocated`` on CUDA, and on CPU the allocations and
frees c10's CPU allocator reports to the PyTorch profiler (``profile_memory=True``).

Pitfalls handled here (docs/estimation.md explains each):

* MemTracker refuses a second forward of the root module; per-module stats are reset between
  iterations (``reset_mod_stats``), so the module breakdown is the last, steady iteration's,
  while the global peak spans all iterations (Adam's state only exists from the first step on).
* A ``foreach`` optimizer step allocates temporaries while MemTracker is in its optimizer region,
  so it files them as optimizer state. The steady state is measured separately from
  ``optimizer.state``; the excess at the peak is reported as temporaries.
* MemTracker files a parameter's gradient as a temporary from the op that creates it until the
  parameter's grad hook relabels it; a peak taken in between (the first layer of backward) keeps
  the wrong label. The tracker subclasses in ``gradpeak`` count those bytes; they are moved from
  temporaries to gradients.
* MemTracker rounds allocations up to CUDA's 512-byte block only for tensors on a CUDA device.
  Estimating a CUDA job on CPU applies the same rounding to every allocation (``round_to``).
* Models fake tensors cannot run (``.item()``, data-dependent control flow, real tensors captured
  at import time) fail with a message that suggests real mode.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools import mem_tracker as _mt
from torch.distributed._tools.common_utils import get_untyped_storages
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed._tools.mem_tracker import MemTracker
from torch.distributed.fsdp import FSDPModule
from torch.utils._pytree import tree_flatten

from stormotel.errors import UsageError
from stormotel.estimate.factory import (
    FactoryError,
    Workload,
    call_factory,
    describe_exception,
    load_factory,
)
from stormotel.estimate.gradpeak import GradientAwareFSDPMemTracker, GradientAwareMemTracker
from stormotel.estimate.report import (
    CATEGORIES,
    Accuracy,
    Estimate,
    ModuleRow,
    OptimizerState,
)

Mode = Literal["fake", "real"]
Progress = Callable[[str], None]

#: CUDA caching allocator's minimum block (c10/cuda/CUDACachingAllocator.cpp, kMinBlockSize).
CUDA_BLOCK_BYTES = 512

#: MemTracker / FSDPMemTracker category (``_RefType.value``) → report category.
TRACKER_CATEGORY: dict[str, str] = {
    "Parameter": "parameters", "Sharded Param": "parameters", "Unsharded Param": "parameters",
    "Buffer": "buffers",
    "Gradient": "gradients", "Sharded Grad": "gradients", "Unsharded Grad": "gradients",
    "Optstate": "optimizer_state", "OptState": "optimizer_state",
    "Activation": "activations",
    "Temp": "temporaries", "All Gather": "temporaries", "Reduce Scatter": "temporaries",
    "Other": "inputs", "Inputs": "inputs",
}
_TOTAL = "Total"
_ITERATIONS_MARK = "stormotel.estimate.iterations"


class _MemoryEvent(Protocol):
    """A profiler ``[memory]`` event: torch's type stub for ``_KinetoEvent`` leaves out
    ``nbytes()``, which the runtime class has (positive on allocation, negative on free)."""

    def nbytes(self) -> int: ...


class EstimationError(UsageError):
    """The workload could not be run (the model raised, or fake tensors cannot trace it)."""


def estimate(spec: str, *, iterations: int = 2, mode: Mode = "fake",
             round_to: int = CUDA_BLOCK_BYTES, depth: int = 2,
             progress: Progress | None = None) -> Estimate:
    """Estimate the peak memory of one training step of the workload ``spec`` builds.

    ``spec`` is ``package.module:function`` returning ``(model, optimizer, batch)``. Raises
    :class:`FactoryError` for factory problems and :class:`EstimationError` when the steps fail.
    """
    if iterations < 1:
        raise ValueError("iterations must be >= 1")
    factory = load_factory(spec)
    # Garbage from earlier work (a previous estimate's graph) freed by the cyclic collector in
    # the middle of the iterations would move the measured peak; start from a clean heap.
    gc.collect()
    outcome = _run_tracked(factory, spec, iterations, mode, round_to,
                           progress or (lambda _msg: None))
    return _build_estimate(outcome, spec, iterations, mode, round_to, depth)


@dataclass
class _Outcome:
    """What a tracked run leaves behind for the report."""

    tracker: GradientAwareMemTracker
    runner: _Runner
    device: torch.device
    optimizer: OptimizerState
    accuracy: Accuracy | None
    warmed_up: bool


def _run_tracked(factory: Callable[[], Any], spec: str, iterations: int, mode: Mode,
                 round_to: int, say: Progress) -> _Outcome:
    """Build the workload (under fake tensors in fake mode) and run it under the tracker."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(_block_rounding(round_to))
        measurer = _AllocatorPeak(round_to) if mode == "real" else None
        if measurer is not None:
            stack.enter_context(measurer.profiling())
        if mode == "fake":
            stack.enter_context(FakeTensorMode())
        say(f"building the workload from {spec} ({mode} tensors)")
        try:
            workload = call_factory(factory, spec)
        except FactoryError as exc:
            reason = _fake_limitation(exc.__cause__) if mode == "fake" else None
            if reason:
                raise FactoryError(f"{exc}; fake tensors cannot run this factory: {reason} — "
                                   "try --mode real") from None
            raise
        device = _model_device(workload)
        tracker = _make_tracker(workload)
        runner = _Runner(tracker, workload, device, say)
        warmed_up = mode == "fake" and isinstance(tracker, FSDPMemTracker)
        try:
            if warmed_up:
                runner.warm_up()
            with tracker, (measurer.iterations(device) if measurer is not None
                           else contextlib.nullcontext()):
                runner.iterations(iterations)
        except Exception as exc:
            raise EstimationError(_step_failure(exc, runner.phase, mode)) from exc
        optimizer = _optimizer_state(workload.optimizer, device, round_to)
    accuracy = None
    if measurer is not None:
        measured, how = measurer.result(device)
        accuracy = Accuracy(tracker_peak_bytes=runner.peak_bytes, measured_peak_bytes=measured,
                            measured_with=how)
    return _Outcome(tracker, runner, device, optimizer, accuracy, warmed_up)


def _build_estimate(out: _Outcome, spec: str, iterations: int, mode: Mode, round_to: int,
                    depth: int) -> Estimate:
    peak = out.tracker.get_tracker_snapshot("peak")
    dev_peak = _device_snapshot(peak, out.device)
    categories, raw = _categories(dev_peak)
    optimizer = out.optimizer
    # foreach scratch that MemTracker filed as optimizer state: move it to temporaries.
    step_temporaries = max(0, categories["optimizer_state"]
                           - optimizer.state_bytes - optimizer.step_tensor_bytes)
    categories["optimizer_state"] -= step_temporaries
    categories["temporaries"] += step_temporaries
    optimizer.step_temporaries_bytes = step_temporaries
    # Weight gradients created by the op that set the peak, relabelled by MemTracker only after.
    late_gradients = out.tracker.late_gradient_bytes(out.device)
    categories["temporaries"] -= late_gradients
    categories["gradients"] += late_gradients
    notes = [f"module breakdown is iteration {iterations - 1}'s (stats reset between "
             "iterations); the peak spans all iterations"]
    if round_to > 1:
        notes.append(f"every allocation rounded up to {round_to} B as CUDA's caching allocator "
                     "does (--round-to 1 for exact tensor bytes)")
    if optimizer.step_tensor_bytes:
        notes.append("optimizer_state includes the per-parameter 'step' counters "
                     f"({optimizer.step_tensor_bytes} B); on CUDA they stay on the host unless "
                     "capturable=True or fused=True")
    if late_gradients:
        notes.append(f"gradients include {late_gradients} B MemTracker still filed as temporaries "
                     "at the peak (a weight gradient is relabelled only when autograd hands it to "
                     "its parameter, after the op that created it)")
    if out.warmed_up:
        notes.append("one untracked warm-up iteration ran first (FSDP in fake mode: DTensor's "
                     "first sharding propagation would otherwise be counted as optimizer memory)")
    return Estimate(
        factory=spec, mode=mode, iterations=iterations, round_to=max(round_to, 1),
        tracker=out.tracker.base_name, device=str(out.device), categories=categories,
        peak_bytes=int(dev_peak.get(_TOTAL, 0)), peak_during=out.runner.peak_during,
        optimizer=optimizer, modules=_module_rows(out.tracker, out.device, depth),
        per_iteration=out.runner.records, tracker_categories=raw,
        per_device_peak_bytes={str(d): int(s.get(_TOTAL, 0)) for d, s in peak.items()},
        accuracy=out.accuracy, notes=notes)


class _Runner:
    """The training loop under the tracker, recording a snapshot after every phase."""

    def __init__(self, tracker: MemTracker, workload: Workload, device: torch.device,
                 say: Progress) -> None:
        self.tracker = tracker
        self.workload = workload
        self.device = device
        self.say = say
        self.phase = "setup"
        self.peak_during = "setup"
        self.records: list[dict[str, Any]] = []
        #: The tracker's global peak on ``device`` at the last checkpoint.
        self.peak_bytes = 0

    def warm_up(self) -> None:
        """One step outside the tracker, for caches that would otherwise be counted.

        DTensor caches its sharding propagation. The first time an op meets a sharded
        parameter, propagation runs on tensors of the full (unsharded) shape under the active
        fake mode, and MemTracker cannot tell them from the step's own tensors: on torch 2.13 the
        first FSDP optimizer step in fake mode shows ~13x the sharded parameters as optimizer
        memory; every later step shows none, exactly as real mode does.
        """
        model, optimizer = self.workload.model, self.workload.optimizer
        self.phase = "warm-up iteration"
        _loss(_call_model(model, self.workload.batch)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def iterations(self, n: int) -> None:
        model, optimizer, batch = self.workload.model, self.workload.optimizer, self.workload.batch
        for i in range(n):
            self.say(f"iteration {i + 1}/{n}")
            if i:
                # MemTracker raises on a second root forward unless module stats are reset.
                self.tracker.reset_mod_stats()
            optimizer.zero_grad(set_to_none=True)
            record: dict[str, Any] = {"iteration": i}
            self.phase = f"iteration {i} forward"
            loss = _loss(_call_model(model, batch))
            record["after_forward"] = self._checkpoint()
            self.phase = f"iteration {i} backward"
            loss.backward()
            record["after_backward"] = self._checkpoint()
            self.phase = f"iteration {i} optimizer step"
            optimizer.step()
            record["after_step"] = self._checkpoint()
            record["peak_bytes_so_far"] = self.peak_bytes
            del loss
            self.records.append(record)

    def _checkpoint(self) -> dict[str, int]:
        """Current categories; remember the phase in which the global peak last rose."""
        peak = int(_device_snapshot(self.tracker.get_tracker_snapshot("peak"),
                                    self.device).get(_TOTAL, 0))
        if peak > self.peak_bytes:
            self.peak_bytes, self.peak_during = peak, self.phase
        current = _device_snapshot(self.tracker.get_tracker_snapshot("current"), self.device)
        categories, _ = _categories(current)
        return {**categories, "total": int(current.get(_TOTAL, 0))}


def _call_model(model: torch.nn.Module, batch: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return model(batch)
    if isinstance(batch, dict):
        return model(**batch)
    return model(*batch)


def _loss(output: Any) -> torch.Tensor:
    """The model's output as a scalar to differentiate: a scalar as is, anything else summed."""
    if isinstance(output, dict) and isinstance(output.get("loss"), torch.Tensor):
        output = output["loss"]
    elif hasattr(output, "loss") and isinstance(output.loss, torch.Tensor):
        output = output.loss
    leaves, _ = tree_flatten(output)
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    if not tensors:
        raise TypeError(f"the model returned {type(output).__name__}, not a tensor")
    out = tensors[0]
    if not out.requires_grad:
        raise TypeError("the model's output does not require grad (no trainable parameters "
                        "reached it), so there is no backward pass to estimate")
    return out if out.dim() == 0 else out.sum()


def _make_tracker(workload: Workload) -> GradientAwareMemTracker:
    """FSDPMemTracker for a ``fully_shard`` root, plain MemTracker otherwise (both counting the
    gradients their peak snapshot files as temporaries, see ``gradpeak``)."""
    model = workload.model
    if isinstance(model, FSDPModule):
        fsdp_tracker = GradientAwareFSDPMemTracker(model, workload.optimizer)
        fsdp_tracker.track_inputs(tuple(workload.batch_tensors()))
        return fsdp_tracker
    if any(isinstance(m, FSDPModule) for m in model.modules()):
        raise FactoryError("sub-modules are wrapped with fully_shard but the root model is "
                           "not; wrap the root too (FSDPMemTracker needs an FSDP root)")
    tracker = GradientAwareMemTracker()
    tracker.track_external(model, workload.optimizer, *workload.batch_tensors())
    return tracker


def _model_device(workload: Workload) -> torch.device:
    for p in workload.model.parameters():
        return p.device
    return workload.batch_tensors()[0].device


def _device_snapshot(snapshot: dict[torch.device, dict[str, int]],
                     device: torch.device) -> dict[Any, int]:
    for dev, snap in snapshot.items():
        if dev == device or (dev.type == device.type and (dev.index or 0) == (device.index or 0)):
            return snap
    return {}


def _categories(dev_snap: dict[Any, int]) -> tuple[dict[str, int], dict[str, int]]:
    """Tracker categories → report categories (and the raw ones, keyed by their names)."""
    out = dict.fromkeys(CATEGORIES, 0)
    raw: dict[str, int] = {}
    for key, value in dev_snap.items():
        if key == _TOTAL:
            continue
        name = key.value if isinstance(key, _mt._RefType) else str(key)
        raw[name] = int(value)
        out[TRACKER_CATEGORY.get(name, "temporaries")] += int(value)
    return out, raw


def _optimizer_state(optimizer: torch.optim.Optimizer, device: torch.device,
                     round_to: int) -> OptimizerState:
    """Steady state from ``optimizer.state`` on ``device``: moments vs. ``step`` counters."""
    seen: set[int] = set()
    state = step = 0
    for per_param in optimizer.state.values():
        for key, value in per_param.items():
            if not isinstance(value, torch.Tensor) or value.device.type != device.type:
                continue
            for storage in get_untyped_storages(value):
                if id(storage) in seen:
                    continue
                seen.add(id(storage))
                nbytes = _rounded(storage.nbytes(), round_to)
                if key == "step":
                    step += nbytes
                else:
                    state += nbytes
    return OptimizerState(type(optimizer).__name__, state, step, 0)


def _rounded(nbytes: int, round_to: int) -> int:
    return -(-nbytes // round_to) * round_to if round_to > 1 else nbytes


def _module_rows(tracker: MemTracker, device: torch.device, depth: int) -> list[ModuleRow]:
    rows: list[ModuleRow] = []
    for stats in tracker.memory_tracking.values():
        fqn: str = stats.mod_fqn
        level = fqn.count(".") + 1
        if level > depth:
            continue
        peaks: dict[str, int | None] = {"PEAK_FW": None, "PEAK_BW": None}
        for state, snaps in stats.snapshots.items():
            if state.name in peaks:
                totals = [int(_device_snapshot(s, device).get(_TOTAL, 0)) for s in snaps]
                peaks[state.name] = max(totals) if totals else None
        rows.append(ModuleRow(
            module=fqn, depth=level,
            parameter_bytes=getattr(stats, "parameter_mem", None),
            buffer_bytes=getattr(stats, "buffer_mem", None),
            input_bytes=getattr(stats, "input_mem", None),
            output_bytes=getattr(stats, "output_mem", None),
            peak_forward_bytes=peaks["PEAK_FW"], peak_backward_bytes=peaks["PEAK_BW"]))
    rows.sort(key=lambda r: _natural_key(r.module))
    return rows


def _natural_key(name: str) -> list[tuple[int, int | str]]:
    parts: list[tuple[int, int | str]] = []
    for piece in name.replace(".", " . ").split():
        parts.append((0, int(piece)) if piece.isdigit() else (1, piece))
    return parts


@contextlib.contextmanager
def _block_rounding(round_to: int) -> Iterator[None]:
    """Make MemTracker round every allocation up to ``round_to`` bytes, on any device.

    MemTracker only rounds tensors on a CUDA device (to the 512-byte block); on CPU it counts
    exact bytes, which under-estimates a CUDA job full of small tensors (biases, LayerNorm
    weights, Adam's scalar ``step``). The hook is MemTracker's own per-storage size function.
    """
    if round_to <= 1:
        yield
        return
    info = _mt._WeakRefInfo
    original = info._calculate_mem_consumed

    def rounded(self: Any) -> int:
        return _rounded(self.size * self.element_size, round_to)

    info._calculate_mem_consumed = rounded  # type: ignore[method-assign]
    try:
        yield
    finally:
        info._calculate_mem_consumed = original  # type: ignore[method-assign]


class _AllocatorPeak:
    """Real mode: the allocator's own peak over the iterations, independent of MemTracker."""

    def __init__(self, round_to: int) -> None:
        self.round_to = round_to
        self._prof: torch.profiler.profile | None = None
        self._cuda_peak: int | None = None

    @contextlib.contextmanager
    def profiling(self) -> Iterator[None]:
        """Profile CPU allocations from before the factory runs, so every live byte is seen."""
        self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                            profile_memory=True)
        with _stderr_silenced():
            self._prof.start()
        try:
            yield
        finally:
            with _stderr_silenced():
                self._prof.stop()

    @contextlib.contextmanager
    def iterations(self, device: torch.device) -> Iterator[None]:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        with torch.profiler.record_function(_ITERATIONS_MARK):
            yield
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            self._cuda_peak = int(torch.cuda.max_memory_allocated(device))

    def result(self, device: torch.device) -> tuple[int, str]:
        if device.type == "cuda":
            return int(self._cuda_peak or 0), "torch.cuda.max_memory_allocated"
        if self._prof is None:
            raise RuntimeError("profiling() was not entered")
        legacy = self._prof.profiler
        results = legacy.kineto_results if legacy is not None else None
        if results is None:
            raise RuntimeError("torch.profiler kept no kineto results")
        events = results.events()
        window = [(e.start_ns(), e.end_ns()) for e in events if e.name() == _ITERATIONS_MARK]
        cpu = torch._C._autograd.DeviceType.CPU
        mem = [(e.start_ns(), cast(_MemoryEvent, e).nbytes()) for e in events
               if e.name() == "[memory]" and e.device_type() == cpu]
        how = "the CPU allocator's allocations and frees recorded by torch.profiler"
        if self.round_to > 1:
            how += f", each rounded up to {self.round_to} B"
        if not window or not mem:
            return 0, how
        start, end = window[0]
        return allocation_peak(np.array([m[0] for m in mem], dtype=np.int64),
                               np.array([m[1] for m in mem], dtype=np.int64),
                               start, end, self.round_to), how


@contextlib.contextmanager
def _stderr_silenced() -> Iterator[None]:
    """Hide file descriptor 2 for a moment: kineto's C++ code prints a line to it on every
    profiler start and stop, which would garble the command's own stderr."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def allocation_peak(t_ns: np.ndarray, nbytes: np.ndarray, start_ns: int, end_ns: int,
                    round_to: int = 1) -> int:
    """Peak live bytes inside ``[start_ns, end_ns]`` from signed allocation (+) / free (−) events.

    Live bytes are the running sum from the first event, so allocations made before the window
    (parameters, optimizer state) count towards the level the window starts at.
    """
    order = np.argsort(t_ns, kind="stable")
    t, b = t_ns[order], nbytes[order]
    if round_to > 1:
        b = np.sign(b) * (-(-np.abs(b) // round_to) * round_to)
    live = np.cumsum(b)
    inside = (t >= start_ns) & (t <= end_ns)
    before = np.flatnonzero(t < start_ns)
    level = int(live[before[-1]]) if before.size else 0
    return max(level, int(live[inside].max())) if inside.any() else level


#: (text found in the error chain, why fake tensors cannot do it / what to do instead)
_FAKE_LIMITS: tuple[tuple[str, str], ...] = (
    ("Couldn't swap", "module.to() / .half() / .cuda() cannot convert fake parameters; create "
                      "them in the target dtype or device instead (torch.set_default_dtype, "
                      "with torch.device(...), or the dtype= argument)"),
    ("Mixing fake modes", "copy.deepcopy of a module gives its copy a fake mode of its own "
                          "(nn.TransformerEncoder clones its layer this way); build each layer "
                          "instead of copying one"),
    ("convert all Tensors to FakeTensors", "it uses a real tensor created outside the factory "
                                           "(at import time, or cached)"),
    ("_local_scalar_dense", "it reads tensor values: .item(), .tolist() or Python control flow "
                            "on a tensor"),
    (".numpy()", "it converts tensors to numpy"),
    ("data-dependent", "an output shape depends on tensor values"),
    ("FakeTensor", "an operation is not supported on fake tensors"),
)


def _fake_limitation(exc: BaseException | None) -> str | None:
    """Why fake tensors cannot run this (an error of the mode, not of the model), or None."""
    from torch._subclasses import fake_tensor

    while exc is not None:
        text = str(exc)
        for needle, reason in _FAKE_LIMITS:
            if needle in text:
                return reason
        if isinstance(exc, fake_tensor.DynamicOutputShapeException | fake_tensor.
                      UnsupportedFakeTensorException):
            return "an operation is not supported on fake tensors"
        exc = exc.__cause__ or exc.__context__
    return None


def _step_failure(exc: BaseException, phase: str, mode: Mode) -> str:
    message = f"the training step failed in {phase}: {describe_exception(exc)}"
    if mode == "fake":
        reason = _fake_limitation(exc)
        if reason:
            message += f"; fake tensors cannot run this model: {reason} — try --mode real"
        else:
            message += "; if the model runs with real tensors, try --mode real"
    return message
