"""The two rules helper f7 wrote from fresh6's dev half.

1. torchelastic's failure table pasted without its section header (analyzers/stalls/
   log_failures.py): ChildFailedError.format_msg closes "Failures:" entries with the "-" section
   line and the root failure — the table's last entry — with the "=" border, so a headerless
   entry closed by "=" is the root cause (megatron-lm#1880's rank 0 SIGSEGV).
2. A GPU that stopped answering (analyzers/stalls/log_gpu_lost.py): the NVIDIA driver's Xid 79 /
   "fallen off the bus" lines and nvidia-smi's "Unable to determine the device handle …: Unknown
   Error" name a GPU by PCI address, never a rank: undecided at low, never "healthy" nor "no
   evidence" (returnn#1486), and any rule that names a rank still decides.

Each is checked through ``stormotel analyze --logs`` on the shapes the emitters print.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.stalls.helpers import analyze_log_text

OURS = {"nvidia.xid.fallen_off_bus", "nvidia.gpu.fallen_off_bus", "nvidia_smi.device_handle_lost"}

#: format_msg's root-cause entry, its header cut off by the paste (megatron-lm#1880's shape)
ROOT_ENTRY = ("  rank      : 0 (local_rank: 0)\n"
              "  exitcode  : -11 (pid: 6421)\n"
              "  error_file: <N/A>\n"
              "  traceback : Signal 11 (SIGSEGV) received by PID 6421\n"
              "======================================================\n")
#: a "Failures:" entry, its header cut off: closed by the "-" section line, the paste ends there
OTHER_ENTRY = ("[1]:\n"
               "  time      : 2024-03-01_10:00:07\n"
               "  host      : node-3\n"
               "  rank      : 3 (local_rank: 3)\n"
               "  exitcode  : -11 (pid: 6424)\n"
               "  error_file: <N/A>\n"
               "  traceback : Signal 11 (SIGSEGV) received by PID 6424\n"
               "------------------------------------------------------\n")

#: kernel_rc.c's Xid print with code 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS)
XID_79 = ("[Mon Mar  4 02:11:09 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=2413, name=python, "
          "GPU has fallen off the bus.\n")
#: an Xid of another code (13: a graphics engine exception): not a lost GPU
XID_13 = ("[Mon Mar  4 02:11:09 2024] NVRM: Xid (PCI:0000:3b:00): 13, pid=2413, name=python, "
          "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address\n")
#: osapi.c's three-line message at (re)initialisation
NOT_RESPONDING = ("NVRM: The NVIDIA GPU 0000:b3:00.0\n"
                  "NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
                  "NVRM: fallen off the bus and is not responding to commands.\n")
#: nvidia-smi over NVML, returnn#1486's line
SMI = "Unable to determine the device handle for GPU0000:03:00.0: Unknown Error\n"


def _run(tmp_path: Path, text: str) -> tuple[int, list[dict[str, Any]]]:
    code, report = analyze_log_text(tmp_path, "job.log", text)
    return code, [f for f in report.get("stall_findings", []) if f["consequence_of"] is None]


# --- torchelastic's table without its header ----------------------------------------------------
def test_a_headerless_entry_closed_by_the_border_is_the_root_cause(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, ROOT_ENTRY)
    assert code == 1
    assert [(f["kind"], f["ranks"], f["evidence"]["pattern"]) for f in roots] == [
        ("rank_failure", [0], "torchelastic.root_cause")]


def test_a_headerless_entry_closed_by_the_section_line_is_not(tmp_path: Path) -> None:
    """A "Failures:" entry (closed by "-"): failed after the root cause, named as nothing more."""
    code, report = analyze_log_text(tmp_path, "job.log", OTHER_ENTRY)
    assert code != 0  # a dead rank is never "healthy"
    patterns = {f["evidence"].get("pattern") for f in report.get("stall_findings", [])}
    assert "torchelastic.root_cause" not in patterns


# --- a lost GPU ---------------------------------------------------------------------------------
def _names_the_gpu_not_a_rank(tmp_path: Path, text: str, pattern: str) -> dict[str, Any]:
    code, roots = _run(tmp_path, text)
    assert code == 1, (code, roots)
    assert [(f["kind"], f["ranks"], f["confidence"]) for f in roots] == [("undecided", [], "low")]
    root = roots[0]
    assert root["evidence"]["pattern"] == pattern and root["evidence"]["suspects"] == []
    assert root["remediation"]
    return root


def test_nvidia_smi_losing_a_gpu_is_read_with_its_address(tmp_path: Path) -> None:
    root = _names_the_gpu_not_a_rank(tmp_path, SMI, "nvidia_smi.device_handle_lost")
    assert root["evidence"]["gpu_pci"] == ["0000:03:00.0"]
    assert "Unknown Error" in root["evidence"]["reason"]


def test_nvidia_smi_with_index_and_address_keeps_both(tmp_path: Path) -> None:
    root = _names_the_gpu_not_a_rank(
        tmp_path, "Unable to determine the device handle for GPU1: 0000:34:00.0: Unknown Error\n",
        "nvidia_smi.device_handle_lost")
    assert root["evidence"]["gpu_pci"] == ["0000:34:00.0"] and root["evidence"]["gpu_index"] == [
        "1"]


def test_xid_79_is_read_with_its_address_and_pid(tmp_path: Path) -> None:
    root = _names_the_gpu_not_a_rank(tmp_path, XID_79, "nvidia.xid.fallen_off_bus")
    assert root["evidence"]["gpu_pci"] == ["0000:3b:00"] and root["evidence"]["gpu_pids"] == [
        2413]


def test_the_three_line_driver_message_is_read(tmp_path: Path) -> None:
    root = _names_the_gpu_not_a_rank(tmp_path, NOT_RESPONDING, "nvidia.gpu.fallen_off_bus")
    assert root["evidence"]["gpu_pci"] == ["0000:b3:00.0"]  # from the first of the three lines


def test_an_xid_of_another_code_is_not_a_lost_gpu(tmp_path: Path) -> None:
    code, roots = _run(tmp_path, XID_13)
    assert code != 0 or not roots
    assert not {f["evidence"].get("pattern") for f in roots} & OURS


def test_a_rank_naming_rule_still_decides_over_a_lost_gpu(tmp_path: Path) -> None:
    """A fallback: ranks 0-2 time out, rank 3 logs a step and no timeout — rank 3 is the
    straggler whatever the host's Xid line says (mapping its address is the next step)."""
    timeouts = "".join(
        f"[rank{r}]:[E ProcessGroupNCCL.cpp:523] [Rank {r}] Watchdog caught collective "
        f"operation timeout: WorkNCCL(SeqNum=31, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600272 milliseconds before timing out.\n" for r in (0, 1, 2))
    code, roots = _run(tmp_path, XID_79 + timeouts + "[rank3]: step 4120 loss 1.93\n")
    assert code == 1 and [(f["kind"], f["ranks"]) for f in roots] == [("straggler", [3])]


def test_a_rankless_line_and_a_lost_gpu_give_one_finding(tmp_path: Path) -> None:
    """Both name nobody; the lost GPU is the more specific reading and answers alone."""
    text = ("[rank1]:[E ProcessGroupNCCL.cpp:577] [Rank 1] Some NCCL operations have failed or "
            "timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations "
            "might run on corrupted/incomplete data.\n" + XID_79)
    code, roots = _run(tmp_path, text)
    assert code == 1 and len(roots) == 1
    assert (roots[0]["kind"], roots[0]["evidence"]["pattern"]) == (
        "undecided", "nvidia.xid.fallen_off_bus")


def test_the_driver_message_joined_on_one_line_and_the_state_check_form(tmp_path: Path) -> None:
    for i, (text, address) in enumerate((
            ("NVRM: The NVIDIA GPU 0000:0e:00.0 (PCI ID: 10de:1b06) installed in this system has "
             "fallen off the bus and is not responding to commands.\n", "0000:0e:00.0"),
            ("[  611.204512] NVRM: GPU 0000:b3:00.0: GPU has fallen off the bus.\n",
             "0000:b3:00.0"))):
        (tmp_path / str(i)).mkdir()
        root = _names_the_gpu_not_a_rank(tmp_path / str(i), text, "nvidia.gpu.fallen_off_bus")
        assert root["evidence"]["gpu_pci"] == [address]


def test_an_address_far_above_is_not_taken_for_the_third_line(tmp_path: Path) -> None:
    text = ("NVRM: The NVIDIA GPU 0000:b3:00.0\n" + "epoch 3 step 10 loss 1.2\n" * 5
            + "NVRM: fallen off the bus and is not responding to commands.\n")
    root = _names_the_gpu_not_a_rank(tmp_path, text, "nvidia.gpu.fallen_off_bus")
    assert root["evidence"]["gpu_pci"] == []
