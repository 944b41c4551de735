"""A STAND-IN for NCCL's RAS thread (no NCCL runs on these CPU machines): a loopback TCP server
that speaks the RAS client protocol as ``src/ras/client_support.cc`` (``rasClientEventLoop``,
NCCL v2.28.7-1) implements it, and answers with documents laid out as that file prints them
(``jsonWriteHeader`` / ``jsonStartCommunicator`` / ``jsonWriteRankData`` /
``jsonWriteMissingRank`` / ``jsonWriteFooter`` for JSON; ``rasClientRunComms`` for text).

Modes: ``json`` (2.28.7+: ``SET FORMAT json`` → OK), ``text`` (2.24 – 2.28.3: ``SET FORMAT`` is
an unknown command, the report is text), and the broken ones a user can meet: ``hang`` (accepts,
never answers), ``close`` (closes after the handshake), ``garbage`` (answers the handshake with
bytes that are no RAS line), ``notras`` (an HTTP server's answer).
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

FUNCS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")  # ncclFuncToString


def json_report(counts: dict[int, int], missing: list[int], *, size: int | None = None,
                op: str = "AllReduce") -> str:
    """One communicator: ``counts`` rank → operations of ``op`` launched; ``missing`` ranks did
    not answer (unresponsive). Indented and ordered like NCCL's own printf output."""
    size = size or len(counts) + len(missing)
    ranks = [{"rank": r, "host": "10.0.0.1", "pid": 1000 + r, "cuda_dev": r % 8,
              "nvml_dev": r % 8,
              "status": {"init_state": 0, "async_error": 0, "finalize_called": False,
                         "destroy_flag": False, "abort_flag": False},
              "collective_counts": {f: (n if f == op else 0) for f in FUNCS}}
             for r, n in sorted(counts.items())]
    miss = [{"rank": r, "host": "10.0.0.2", "pid": 2000 + r, "cuda_dev": r % 8,
             "nvml_dev": r % 8, "status": {"unresponsive": True, "considered_dead": False}}
            for r in missing]
    doc = {"nccl_version": "2.28.7", "cuda_runtime_version": 12080,
           "cuda_driver_version": 12080, "timestamp": "2026-11-28 19:00:00",
           "communicators_count": 1,
           "communicators": [{"hash": "0x27a079b828ff1a75",
                              "secondary_hash": "0x1a2b:0x3c4d", "size": size,
                              "ranks_count": len(ranks), "missing_ranks_count": len(miss),
                              "ranks": ranks, "missing_ranks": miss}],
           "ras": {"collection_time_sec": 0.012, "timeouts_count": 0}}
    return json.dumps(doc, indent=2) + "\n"


def text_report_missing(rank: int, size: int) -> str:
    """A text report (2.24 – 2.28.3 lines) of one communicator missing ``rank``."""
    return (
        "NCCL version 2.27.7 compiled with CUDA 12.8\n"
        "CUDA runtime version 12080, driver version 12080\n\n"
        "Job summary\n===========\n\n"
        "  Nodes  Processes         GPUs  Processes     GPUs\n"
        "(total)   per node  per process    (total)  (total)\n"
        f"      1          {size}            1          {size}        {size}\n\n"
        "Communicators... (0.00s)\n=============\n\n"
        "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n"
        "    #  in group  per comm  per node  per comm  in group\n"
        f"    0         1         1         {size}         {size}         {size}   RUNNING  "
        "INCOMPLETE\n\n"
        "Errors\n======\n\n"
        "#0-0 (27a079b828ff1a75) INCOMPLETE\n"
        "  Missing communicator data from 1 rank\n"
        f"  Rank {rank} -- GPU {rank} managed by process {1000 + rank} on node 10.0.0.1\n\n")


class RasStandIn:
    """``with RasStandIn(mode, report) as port:`` — serves until the block ends."""

    def __init__(self, mode: str, report: str = "") -> None:
        self.mode, self.report = mode, report
        self.commands: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> int:
        self._thread.start()
        return self.port

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.sock.close()
        for c in self._conns:
            c.close()
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self._conns.append(conn)
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        buf = b""
        try:
            while not self._stop.is_set():
                if self.mode == "hang":
                    self._stop.wait(0.2)
                    continue
                while b"\n" not in buf:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    buf += chunk
                raw, _, buf = buf.partition(b"\n")
                cmd = raw.decode().rstrip("\r")
                self.commands.append(cmd)
                if self._answer(conn, cmd):
                    return
        except OSError:
            return
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, line: str) -> bool:
        """Answer one command (case-insensitive, as strncasecmp in the source); True when
        the connection is to be closed."""
        cmd = line.lower()
        if self.mode == "garbage":
            conn.sendall(b"\x00\xff\xfe" * 3000)
            return True
        if self.mode == "notras":
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            return True
        if cmd.startswith("client protocol "):
            conn.sendall(b"SERVER PROTOCOL 2\n")
            return self.mode == "close"
        if cmd.startswith("timeout "):
            conn.sendall(b"OK\n")
        elif cmd.startswith("set format ") and self.mode == "json":
            fmt = cmd[len("set format "):]  # strcasecmp
            conn.sendall(b"OK\n" if fmt in ("text", "json") else
                         f"ERROR: Invalid format {fmt}\n".encode())
        elif cmd in ("status", "verbose status"):
            conn.sendall(self.report.encode())
            return True  # RAS_CLIENT_FINISHED: the server terminates the client
        else:
            conn.sendall(f"ERROR: Unknown command {line}\n".encode())
        return False
