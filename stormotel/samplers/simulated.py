"""A deterministic, scriptable GPU for machines without one (demos, tests, CI).

Every number is a pure function of the simulated clock ``t`` (seconds since ``epoch_ns``) and the
rank, so two runs with the same faults and epoch produce the same curves, and ranks that share an
epoch (``STORMOTEL_SIM_EPOCH_NS``, or the ``epoch_ns`` argument) see their faults line up exactly.

A shared epoch fixed when the ranks are launched puts the faults at fixed instants whatever the
ranks' start: on a loaded host a tracker that starts late meets a planted rise inside its
warm-up window, where the analysis sets a rank's first rise aside (``stormotel rehearse`` at
load 21: "no rank led — warm-up of ranks [0, 1]"). An epoch *file*
(``STORMOTEL_SIM_EPOCH_FILE``, or ``epoch_file``) is read instead once it exists: its writer
sets t=0 after every rank has started, and until then no fault starts (steps run on the rank's
own clock). A file that never comes is waited for at most :data:`EPOCH_FILE_WAIT_S`; then
the moment the wait ended is t=0, with a warning.

The baseline looks like training: weights and optimizer state held constant, activations rising
during the forward pass and released in backward (a sawtooth with ``step_period_s``), a caching
allocator that keeps the peak reserved, and a constant gap (CUDA context, NCCL buffers) on top.
Faults (see :mod:`stormotel.samplers.faults`) bend those curves for the ranks they target.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Sequence

from stormotel import environment
from stormotel.samplers.base import Sample
from stormotel.samplers.faults import Fault, parse_faults

__all__ = ["SimulatedOutOfMemoryError", "SimulatedSampler"]

MiB = 2**20
GiB = 2**30
#: The longest a simulated device waits for its epoch file before its own clock sets t=0:
#: longer than ``stormotel rehearse`` waits for every rank to start and be scraped.
EPOCH_FILE_WAIT_S = 300.0


class SimulatedOutOfMemoryError(RuntimeError):
    """Raised by :meth:`SimulatedSampler.raise_if_oom`; its text matches torch's ("out of memory"),
    so ``MemoryTracker.capture_oom`` treats it like a real CUDA OOM."""


class SimulatedSampler:
    """The simulated device of one rank."""

    name = "simulated"

    def __init__(self, rank: int = 0, faults: str | Sequence[str] | Sequence[Fault] | None = None,
                 *, device_index: int = 0, total_bytes: int = 16 * GiB,
                 epoch_ns: int | None = None, step_period_s: float = 1.0,
                 weights_bytes: int = 2 * GiB, activation_peak_bytes: int = 3 * GiB,
                 gap_bytes: int = 512 * MiB, gpu_uuid: str | None = None,
                 epoch_file: str | os.PathLike[str] | None = None,
                 clock_ns: Callable[[], int] = time.time_ns) -> None:
        if faults is None:
            faults = _env_faults()
        if isinstance(faults, str) or (faults and isinstance(faults[0], str)):
            self.faults: tuple[Fault, ...] = parse_faults(faults)  # type: ignore[arg-type]
        else:
            self.faults = tuple(faults)  # type: ignore[arg-type]
        if epoch_ns is None:
            env_epoch = environment.env_epoch_ns(os.environ)
            epoch_ns = env_epoch if env_epoch is not None else clock_ns()
            shared_epoch = env_epoch is not None
        else:
            shared_epoch = False
        self.rank = rank
        self.device_index = device_index
        self.gpu_uuid: str | None = gpu_uuid or f"GPU-simulated-{device_index}"
        self.gpu_name: str | None = f"Simulated GPU ({total_bytes / GiB:.0f} GiB)"
        self.total_bytes = total_bytes
        self.epoch_ns = epoch_ns
        self.step_period_s = step_period_s
        self.weights_bytes = weights_bytes
        self.activation_peak_bytes = activation_peak_bytes
        self.gap_bytes = gap_bytes
        self._clock_ns = clock_ns
        self._born_ns = clock_ns()
        #: With a shared epoch (faults at one absolute time across ranks started apart), each
        #: rank still warms up from its own start, as a real process does.
        #: (The epoch may lie in the future: a rank started early is warm by then.)
        self.warmup_origin_s = self.elapsed_s(self._born_ns) if shared_epoch else 0.0
        self._raised: set[int] = set()
        self._lock = threading.Lock()
        if epoch_file is None:
            epoch_file = os.environ.get(environment.SIM_EPOCH_FILE, "").strip() or None
        #: The file t=0 will come from; None once it is known (or never asked for).
        self._epoch_file: str | None = os.fspath(epoch_file) if epoch_file is not None else None

    # -- the shared epoch, from a file written once every rank has started -------------------
    @property
    def epoch_pending(self) -> bool:
        """Whether t=0 is still to come from the epoch file (no fault starts until then)."""
        return self._epoch_file is not None

    def epoch_known(self) -> bool:
        """Read the epoch file if t=0 is still pending; whether t=0 is known now."""
        path = self._epoch_file
        if path is None:
            return True
        now = self._clock_ns()
        try:
            with open(path, encoding="ascii") as fh:
                text: str | None = fh.read(64)
        except FileNotFoundError:
            text = None
        except (OSError, UnicodeDecodeError) as e:
            text = f"unreadable: {e}"
        if text is None and now - self._born_ns < EPOCH_FILE_WAIT_S * 1e9:
            return False
        epoch = None if text is None else environment.epoch_ns_from_text(text)
        with self._lock:
            if self._epoch_file is None:  # another thread read it meanwhile
                return True
            if epoch is None:
                why = (f"not there after {EPOCH_FILE_WAIT_S:g}s" if text is None
                       else f"not an integer number of ns ({text.strip()[:40]!r})")
                environment.warn_default(environment.SIM_EPOCH_FILE, path,
                                         f"a file holding t=0 ({why})", "t=0 now")
                epoch = now
            self.epoch_ns = epoch
            self.warmup_origin_s = (self._born_ns - epoch) / 1e9
            self._epoch_file = None
        return True

    # -- the model --------------------------------------------------------------------------
    def _fault_start(self, fault: Fault) -> float:
        """When a fault starts on this rank (followers of a first_spike start ``lead`` later)."""
        if fault.kind == "first_spike" and not fault.owned_by(self.rank):
            return fault.start_s + fault.param("lead")
        return fault.start_s

    def _applies(self, fault: Fault) -> bool:
        return fault.kind == "first_spike" or fault.owned_by(self.rank)

    def reading_at(self, t: float, timestamp_ns: int = 0) -> Sample:
        """The device state ``t`` seconds after the epoch (pure; clamps t < 0 to 0; no fault
        while t=0 is pending on an epoch file)."""
        since_start = t - self.warmup_origin_s
        # Steps run before a future shared epoch too (only the faults wait for it).
        phase = (t % self.step_period_s) / self.step_period_s
        t = max(0.0, t)
        ramp = phase / 0.6 if phase < 0.6 else (1.0 - phase) / 0.4
        jitter = int((self.rank + 1) * MiB * math.sin(2.3 * t + self.rank))
        allocated = self.weights_bytes + int(self.activation_peak_bytes * ramp) + jitter
        # The first forward pass fills the cache.
        warmed = min(1.0, max(0.0, since_start) / (0.6 * self.step_period_s))
        reserved_floor = self.weights_bytes + 20 * MiB + int(self.activation_peak_bytes * warmed)
        alloc_extra = 0
        gap = self.gap_bytes
        frag_factor = 0.0
        retries = 0
        ooms = 0
        for fault in () if self.epoch_pending else self.faults:
            if not self._applies(fault):
                continue
            start = self._fault_start(fault)
            if t < start:
                continue
            since = t - start
            if fault.kind == "first_spike" and since < fault.param("duration"):
                alloc_extra += int(fault.param("delta"))
            elif fault.kind == "leak":
                gap += int(fault.param("rate") * since)
            elif fault.kind == "spike" and since < fault.param("duration"):
                gap += int(fault.param("delta"))
            elif fault.kind == "fragmentation":
                frag_factor = max(frag_factor, fault.param("factor"))
                retries += int(since)
            elif fault.kind == "oom":
                ooms += 1
        allocated += alloc_extra
        reserved = max(reserved_floor + alloc_extra, allocated)
        if frag_factor:
            reserved = max(reserved, int(allocated * frag_factor))
        inactive_split = (reserved - allocated) * (8 if frag_factor else 1) // 10
        used = reserved + gap
        if ooms:
            used = self.total_bytes
        elif used > self.total_bytes:  # the allocator would have failed here
            ooms = 1
            used = self.total_bytes
        return Sample(timestamp_ns=timestamp_ns, allocated=allocated, reserved=reserved,
                      active=allocated, inactive_split=inactive_split, device_used=used,
                      device_total=self.total_bytes, device_free=self.total_bytes - used,
                      process_used=used, alloc_retries=retries, num_ooms=ooms)

    # -- Sampler protocol -------------------------------------------------------------------
    def elapsed_s(self, now_ns: int | None = None) -> float:
        now = self._clock_ns() if now_ns is None else now_ns
        return (now - self.epoch_ns) / 1e9

    def sample(self) -> Sample:
        self.epoch_known()
        now = self._clock_ns()
        return self.reading_at(self.elapsed_s(now), timestamp_ns=now)

    def started(self, kind: str) -> bool:
        """Whether a fault of ``kind`` owned by this rank has started (process faults)."""
        if not self.epoch_known():
            return False
        t = self.elapsed_s()
        return any(f.kind == kind and f.owned_by(self.rank) and t >= f.start_s
                   for f in self.faults)

    def raise_if_oom(self) -> None:
        """Raise :class:`SimulatedOutOfMemoryError` once per ``oom`` fault that has started."""
        if not self.epoch_known():
            return
        t = self.elapsed_s()
        for i, fault in enumerate(self.faults):
            if fault.kind == "oom" and fault.owned_by(self.rank) and t >= fault.start_s:
                with self._lock:
                    if i in self._raised:
                        continue
                    self._raised.add(i)
                raise SimulatedOutOfMemoryError(
                    f"CUDA out of memory (simulated device {self.device_index}, rank "
                    f"{self.rank}): tried to allocate {self.activation_peak_bytes // MiB} MiB; "
                    f"{self.total_bytes / GiB:.0f} GiB total capacity")

    def exit_after_oom_s(self) -> float | None:
        """Seconds after the epoch at which a planted ``oom`` fault with ``exit=`` ends this
        rank (the earliest), or None when none does (or t=0 is still pending)."""
        if self.epoch_pending:
            return None
        ends = [f.start_s + f.param("exit") for f in self.faults
                if f.kind == "oom" and f.owned_by(self.rank) and f.param("exit") < math.inf]
        return min(ends) if ends else None

    def close(self) -> None:
        """Nothing to release."""


def _env_faults() -> str:
    """``STORMOTEL_SIM_FAULTS``, checked once: a spec that does not parse is a warning and no
    faults (a deployment's variable never stops the run; ``--fault`` given on the command line
    is checked as a usage error instead)."""
    raw = os.environ.get(environment.SIM_FAULTS, "")
    if raw.strip():
        try:
            parse_faults(raw)
        except ValueError as e:
            environment.warn_default(environment.SIM_FAULTS, raw, f"a fault spec ({e})", "none")
            return ""
    return raw
