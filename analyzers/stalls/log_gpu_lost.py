"""A GPU that stopped answering, read from the driver's and nvidia-smi's own lines.

Why: a job whose GPU falls off the bus hangs — the process on it cannot progress, its peers wait
in the next collective — and its logs may hold no PyTorch or NCCL line at all, only the host's
evidence that a card is gone (fresh6's returnn#1486: nvidia-smi and dmesg, read as "no evidence"
before). The messages are read off their emitters (``grammar``, patterns of kind ``gpu_lost``):

- ``nvidia.xid.fallen_off_bus`` — the kernel driver's Xid report "NVRM: Xid (PCI:dddd:bb:ss):
  79, pid=…" (kernel_rc.c; 79 is ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS in nverror.h).
- ``nvidia.gpu.fallen_off_bus`` — "NVRM: GPU dddd:bb:ss.f: GPU has fallen off the bus."
  (osinit.c, when the boot register no longer reads back) and the three-line "The NVIDIA GPU
  dddd:bb:ss.f … installed in this system has / fallen off the bus and is not responding to
  commands." (osapi.c, NV_ERR_GPU_IS_LOST at (re)initialisation).
- ``nvidia_smi.device_handle_lost`` — nvidia-smi's "Unable to determine the device handle for
  GPU…: Unknown Error | GPU is lost" (NVML could not open the device; NVML_ERROR_GPU_IS_LOST is
  "fallen off the bus or otherwise inaccessible"). The same text is printed when a card was
  never initialised at boot, so it proves the GPU is unusable, not when it went.

Each names a GPU by PCI address (an Xid also a pid), never a rank: a rank is the process bound
to that GPU, which only the job's own lines can tell (NCCL_DEBUG=INFO's "rank R … busId B"
init line on that host, CUDA_VISIBLE_DEVICES / LOCAL_RANK). So the answer is ``undecided`` at
``low`` naming the address and what to collect to map it — never "healthy" nor "no evidence".

A FALLBACK row of :data:`.log_scanners.KINDS`, and more: it answers only when every other line
of the logs is one the rankless fallback counts as quiet (:data:`.log_rankless.QUIET`) — a
watchdog line, an error naming a rank, a launcher's failure decides instead — and then it
answers in the rankless fallback's place (its kind is not in that set, so the two do not both
answer): the lost GPU is the more specific reading.
"""

from __future__ import annotations

import re
from typing import Any

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import log_rankless
from stormotel.analyzers.stalls.log_finding import LineRead, LineScanner, log_finding

KIND = "gpu_lost"
XID_79 = "nvidia.xid.fallen_off_bus"
FALLEN = "nvidia.gpu.fallen_off_bus"
SMI_LOST = "nvidia_smi.device_handle_lost"
#: in the order one answers when a log holds several: the driver's own report first
PATTERNS: tuple[str, ...] = (XID_79, FALLEN, SMI_LOST)

_SAYS = {
    XID_79: "the NVIDIA driver reported Xid 79 (GPU has fallen off the bus)",
    FALLEN: "the NVIDIA driver reported a GPU fallen off the bus, not responding to commands",
    SMI_LOST: "nvidia-smi could not open a GPU ({err}): it is inaccessible — fallen off the "
              "bus, a driver fault, or never initialised at boot",
}

REMEDIATION = [
    "Map the GPU to its rank: on that host, the NCCL_DEBUG=INFO init line 'comm … rank R nranks "
    "N cudaDev D … busId B' whose busId is the PCI address (bus 0000:3b:00.0 is busId 3b000), or "
    "the process's pid from the Xid line against the launcher's pid per local rank; that rank "
    "is the one that stopped, the others are waiting on it.",
    "Collect the host's kernel log around the first report (dmesg -T / journalctl -k: Xid, "
    "PCIe AER, 'fallen off the bus') and nvidia-smi -q on that host; the GPU needs a reset or "
    "the node draining before the job is restarted on it."]

#: a PCI address as nvidia-smi and the driver print it ("0000:03:00.0", "0000:3b:00")
_ADDR = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?$")


#: osapi.c's first line of the three: "The NVIDIA GPU dddd:bb:ss.f" (the pasted "NVRM: " prefix
#: may be gone), which gives the address the third line, "fallen off the bus …", does not carry
_FIRST_LINE = re.compile(r"\bThe NVIDIA GPU (?P<bus>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:"
                         r"[0-9a-fA-F]{2}\.[0-7])\b")
#: the three lines are consecutive: an address further up belongs to another message
_WITHIN = 3


class Scanner(LineScanner):
    kind = KIND
    patterns = PATTERNS

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._no = 0
        self._above: tuple[int, str] | None = None  #: (line, address) of a first line

    def feed(self, no: int, seg: str, low: str, rank: int | None) -> None:
        self._no = no
        if "the nvidia gpu " in low and (first := _FIRST_LINE.search(seg)):
            self._above = (no, first.group("bus"))
        super().feed(no, seg, low, rank)

    def read(self, pid: str, m: re.Match[str], rank: int | None) -> LineRead:
        groups = m.groupdict()
        address = groups.get("bus") or groups.get("bus2")
        if address is None and pid == FALLEN and self._above is not None \
                and 0 < self._no - self._above[0] < _WITHIN:
            address = self._above[1]
        gpu = groups.get("gpu")
        if address is None and gpu and _ADDR.match(gpu):
            address, gpu = gpu, None
        detail: dict[str, object] = {"reporter": rank, "pci": address,
                                     "gpu_index": gpu, "error": groups.get("err")}
        if groups.get("pid"):
            detail["pid"] = int(groups["pid"])
        return rank, detail


def findings(events: list[Any], known: int | None) -> list[StallFinding]:
    """``undecided`` (low) naming the lost GPU(s), when nothing but quiet lines is beside them."""
    mine = [e for e in events if e.kind == KIND and e.pattern in PATTERNS]
    if not mine or any(e.kind != KIND and e.kind not in log_rankless.QUIET for e in events):
        return []
    first = min(mine, key=lambda e: PATTERNS.index(e.pattern))
    details = [e.detail or {} for e in mine]
    addresses = sorted({str(d["pci"]) for d in details if d.get("pci")})
    indexes = sorted({str(d["gpu_index"]) for d in details if d.get("gpu_index")})
    pids = sorted({int(d["pid"]) for d in details if d.get("pid") is not None})
    err = next((str(d["error"]) for d in details if d.get("error")), "?")
    which = ", ".join([f"PCI {a}" for a in addresses] + [f"GPU index {i}" for i in indexes])
    reason = (_SAYS[first.pattern].format(err=err)
              + (f" — {which}" if which else "")
              + (f"; process(es) {', '.join(map(str, pids[:8]))}" if pids else "")
              + f" ({len(mine)} line(s)). A process on that GPU cannot progress and its peers "
              "wait in their next collective; the lines name the GPU, not a rank — nobody named")
    return [log_finding("undecided", [], "gpu_lost", "low", first.pattern, reason,
                        REMEDIATION, mine, suspects=[], gpu_pci=addresses, gpu_index=indexes,
                        gpu_pids=pids)]
