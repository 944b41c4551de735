"""``stormotel analyze --nccl-ras HOST[:PORT]``: ask a running job's NCCL RAS thread for its status.

NCCL 2.24+ runs a RAS thread in every process, listening on ``localhost:28028``
(``NCCL_RAS_ADDR``). Its client protocol is a line protocol over plain TCP (not HTTP), read
from NCCL's own source — ``src/ras/client_support.cc`` ``rasClientEventLoop`` and the
``ncclras`` tool ``src/ras/client.cc`` (tags v2.24.3-1 … v2.30.7-1; ``NCCL_RAS_CLIENT_PROTOCOL``
is 2 in ``src/ras/ras_internal.h`` at every one of them):

1. client ``CLIENT PROTOCOL 2\\n`` → server ``SERVER PROTOCOL 2\\n``;
2. client ``TIMEOUT <secs>\\n`` → ``OK\\n`` (``ERROR: Invalid timeout value …`` otherwise);
3. client ``SET FORMAT json\\n`` → ``OK\\n`` on 2.28.7+; older servers answer
   ``ERROR: Unknown command SET FORMAT json\\n`` and we stay with text;
4. client ``VERBOSE STATUS\\n`` (or ``STATUS``) → the report, then the server closes the socket
   (``rasClientTerminate`` once the send queue drains in state ``RAS_CLIENT_FINISHED``).

Commands are case-insensitive and end at ``\\n`` (a trailing ``\\r`` is dropped). The answer is
read by the RAS report readers the ``--logs`` path already has (:mod:`.log_ras`: the text
report's MISMATCH / INCOMPLETE sections, and the JSON document's ``collective_counts`` and
``missing_ranks``), and judged by the same rules (:func:`.log_ras_verdicts.ras_findings`), so a
live query and a pasted ``ncclras`` output give the same verdict. Every step is bounded in time and
size: a server that hangs, closes early or sends something else gives a one-line error, never a
traceback.
"""

from __future__ import annotations

import dataclasses
import socket
import time
from dataclasses import dataclass, field

from stormotel.analyzers.report import StallFinding
from stormotel.analyzers.stalls import log_ras
from stormotel.analyzers.stalls import logs_parser as lp
from stormotel.analyzers.stalls.log_ras_verdicts import ras_findings

DEFAULT_PORT = 28028  #: NCCL_RAS_CLIENT_PORT, src/ras/ras_internal.h
PROTOCOL = 2  #: NCCL_RAS_CLIENT_PROTOCOL, src/ras/ras_internal.h (2.24 … 2.30)
#: the RAS gathers data with a 5 s leg timeout plus 5 s extra (RAS_COLLECTIVE_*_TIMEOUT_SEC);
#: the ncclras tool waits that much past the TIMEOUT it sends, so do we
RAS_TIMEOUT_S = 5
MAX_ANSWER_BYTES = 64 << 20  #: a report of 100k ranks is a few tens of MB


class RasQueryError(Exception):
    """The RAS endpoint could not be queried; the message is one line, with what to check."""


@dataclass
class RasAnswer:
    """One endpoint's answer: the report text and in which format it came."""

    endpoint: str
    text: str
    format: str  #: "json" (2.28.7+) or "text"
    server_protocol: str
    notes: list[str] = field(default_factory=list)


def parse_endpoint(spec: str) -> tuple[str, int]:
    """``HOST``, ``HOST:PORT`` or ``[V6]:PORT`` → (host, port); raises ValueError."""
    spec = spec.strip()
    if not spec:
        raise ValueError("empty NCCL RAS address")
    if spec.startswith("["):
        host, _, rest = spec[1:].partition("]")
        port_s = rest[1:] if rest.startswith(":") else ""
    elif spec.count(":") == 1:
        host, port_s = spec.split(":")
    else:
        host, port_s = spec, ""
    port = int(port_s) if port_s else DEFAULT_PORT
    if not host or not 0 < port < 65536:
        raise ValueError(f"not a HOST[:PORT]: {spec!r}")
    return host, port


class _Conn:
    """A socket with an overall deadline and line reads."""

    def __init__(self, sock: socket.socket, deadline: float, where: str) -> None:
        self.sock, self.deadline, self.where, self.buf = sock, deadline, where, b""

    def _recv(self) -> bytes:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RasQueryError(f"{self.where}: no answer in time (the RAS thread may be busy "
                                "or this is not an NCCL RAS port)")
        self.sock.settimeout(left)
        try:
            return self.sock.recv(65536)
        except TimeoutError:
            raise RasQueryError(f"{self.where}: no answer in time (the RAS thread may be busy "
                                "or this is not an NCCL RAS port)") from None
        except ConnectionResetError:
            raise RasQueryError(f"{self.where}: closed the connection (reset by peer): not an "
                                "NCCL RAS port, or the process is exiting") from None
        except OSError as exc:
            raise RasQueryError(f"{self.where}: connection lost ({exc.strerror or exc})") from None

    def send(self, line: str) -> None:
        try:
            self.sock.sendall(line.encode("ascii"))
        except (ConnectionResetError, BrokenPipeError):
            raise RasQueryError(f"{self.where}: closed the connection before {line.strip()!r}: "
                                "not an NCCL RAS port, or the process is exiting") from None
        except OSError as exc:
            raise RasQueryError(f"{self.where}: could not send {line.strip()!r} "
                                f"({exc.strerror or exc})") from None

    def line(self, after: str) -> str:
        while b"\n" not in self.buf:
            if len(self.buf) > 4096:
                raise RasQueryError(f"{self.where}: answered {after!r} with something that is "
                                    "not an NCCL RAS line: not an NCCL RAS port?")
            chunk = self._recv()
            if not chunk:
                raise RasQueryError(f"{self.where}: closed the connection after {after!r}: "
                                    "not an NCCL RAS port, or the process is exiting")
            self.buf += chunk
        raw, _, self.buf = self.buf.partition(b"\n")
        return raw.decode("utf-8", "replace").rstrip("\r")

    def rest(self) -> bytes:
        out = bytearray(self.buf)
        while True:
            chunk = self._recv()
            if not chunk:
                return bytes(out)
            out += chunk
            if len(out) > MAX_ANSWER_BYTES:
                raise RasQueryError(f"{self.where}: answer larger than {MAX_ANSWER_BYTES >> 20} "
                                    "MiB: not an NCCL RAS report")


def query(spec: str, *, timeout_s: float | None = None, verbose: bool = True,
          want_json: bool = True) -> RasAnswer:
    """Ask the RAS thread at ``spec`` for its (verbose) status, as JSON where it can."""
    try:
        host, port = parse_endpoint(spec)
    except ValueError as exc:
        raise RasQueryError(f"--nccl-ras {spec}: {exc}") from None
    where = f"NCCL RAS at {host}:{port}"
    budget = timeout_s if timeout_s is not None else 2 * RAS_TIMEOUT_S + 5
    deadline = time.monotonic() + budget
    try:
        sock = socket.create_connection((host, port), timeout=min(budget, 5.0))
    except OSError as exc:
        raise RasQueryError(
            f"{where}: cannot connect ({exc.strerror or exc}); RAS listens only where NCCL "
            "2.24+ runs with NCCL_RAS_ENABLE unset or 1, on localhost:28028 unless "
            "NCCL_RAS_ADDR says otherwise") from None
    with sock:
        c = _Conn(sock, deadline, where)
        c.send(f"CLIENT PROTOCOL {PROTOCOL}\n")
        hello = c.line("CLIENT PROTOCOL")
        if not hello.upper().startswith("SERVER PROTOCOL "):
            raise RasQueryError(f"{where}: answered the handshake with {hello[:80]!r}, not "
                                "'SERVER PROTOCOL n': not an NCCL RAS port?")
        proto = hello[len("SERVER PROTOCOL "):].strip()
        notes = [] if proto == str(PROTOCOL) else [
            f"{where} speaks RAS client protocol {proto[:20]!r}, this reader {PROTOCOL}"]
        c.send(f"TIMEOUT {RAS_TIMEOUT_S}\n")
        ok = c.line("TIMEOUT")
        if ok.strip().upper() != "OK":
            notes.append(f"{where} refused TIMEOUT: {ok[:80]!r}")
        fmt = "text"
        if want_json:
            c.send("SET FORMAT json\n")
            ans = c.line("SET FORMAT json")
            if ans.strip().upper() == "OK":
                fmt = "json"
            else:
                notes.append(f"{where}: no JSON before NCCL 2.28.7 ({ans[:80]!r}); read the "
                             "text report")
        c.send("VERBOSE STATUS\n" if verbose else "STATUS\n")
        body = c.rest()
    text = body.decode("utf-8", "replace")
    if not text.strip():
        raise RasQueryError(f"{where}: closed the connection without a status report")
    return RasAnswer(f"{host}:{port}", text, fmt, proto, notes)


@dataclass
class RasEvidence:
    """What the RAS answers prove: findings in the shape the log rules give, and notes."""

    findings: list[StallFinding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    communicators: int = 0
    answers: list[dict[str, object]] = field(default_factory=list)


def blocks_of(answer: RasAnswer) -> tuple[list[log_ras.RasBlock], int, bool]:
    """The count splits / missing ranks in one answer, how many communicators it covered, and
    whether it was a readable report at all."""
    if answer.format == "json" or '"collective_counts"' in answer.text:
        blocks = log_ras.blocks_from_json(answer.text)
        n = answer.text.count('"secondary_hash"')
        return blocks, n, '"communicators"' in answer.text
    scanner = log_ras.RasScanner()
    for no, line in enumerate(answer.text.splitlines(), 1):
        scanner.feed(no, line, line.lower())
    scanner.close()
    n = sum(1 for line in answer.text.splitlines() if line.startswith("#"))
    return scanner.blocks, n, "NCCL version" in answer.text or "Communicators" in answer.text


def evidence_from_answers(answers: list[RasAnswer], world_size: int | None) -> RasEvidence:
    """Every answer's blocks, judged together by the RAS rules of the log reader."""
    out = RasEvidence()
    events: list[lp.LogEvent] = []
    for a in answers:
        blocks, n_comms, readable = blocks_of(a)
        out.notes.extend(a.notes)
        src = f"ncclras://{a.endpoint}"
        if not readable:
            out.notes.append(f"NCCL RAS at {a.endpoint}: the answer is not a RAS status report "
                             f"({len(a.text)} bytes, starts {a.text[:60]!r}); nothing read")
        elif not blocks:
            out.notes.append(f"NCCL RAS at {a.endpoint} ({a.format}): {n_comms} "
                             "communicator(s), every rank answered and the collective counts "
                             "agree — RAS sees no stall at this instant (query again: counts "
                             "that never move are a stall RAS cannot split)")
        out.communicators += n_comms
        out.answers.append({"endpoint": a.endpoint, "format": a.format,
                            "protocol": a.server_protocol, "communicators": n_comms,
                            "splits": len(blocks)})
        for b in blocks:
            events.append(lp.LogEvent(lp.RAS, src, b.line, None, text=b.text,
                                      detail=b.as_detail(), pattern=b.pattern))
    out.findings = [dataclasses.replace(
        f, evidence={**f.evidence, "read_from": "live NCCL RAS query"})
        for f in ras_findings(events, world_size)]
    return out
