"""Lines as users paste them, normalised once before any pattern reads them.

A stall message rarely reaches the analyzer as its emitter printed it: a launcher, a log
collector, a terminal or an issue tracker has wrapped it. Each wrapper's format is read from
its own source or documentation, and undone here, per file, before the segmenting of
:mod:`.logs_parser` and every catalogue pattern run:

- **Open MPI / PRRTE ``--tag-output``** (mpirun, horovodrun): ORTE's
  ``orte/mca/iof/base/iof_base_output.c`` writes ``[jobid,vpid]<stdout|stderr|stddiag>:`` in
  front of each chunk it read from a rank *and after every newline in it*; a chunk that did not
  end in a newline is followed by the next chunk's tag on the same physical line (of this rank,
  or interleaved from another). With ``--timestamp-output`` ``ctime()`` comes first
  (``Mon Nov 28 23:13:17 2026[1,0]<stderr>:``). PMIx's ``src/common/pmix_iof.c`` (Open MPI 5)
  writes ``[jobid,rank]<stdout>: `` (a space), ``[nspace,rank]<…>: `` with ``--tag-output
  fullname``, ``[jobid,rank][host:pid]<…>: `` (detailed), ``[rank]<…>: `` and a ``[ctime]``
  timestamp in front. So a tag *inside* a line starts a new fragment: fragments of one tag are
  glued back into the message they cut (one Horovod stall report spread over many fragments
  reads as the lines it was), and each message is re-emitted as ``[jobid,rank]<stream>:text``
  at the start of its line — where the parser reads the rank (the MPI rank is evidence of
  which process printed the line). A launcher prefix in front of the tag (a timestamp, a
  host) is dropped, an ISO time in it is kept after the tag.
- **Slurm ``srun --label``**: ``write_labelled_message.c`` prints ``"%*d: "`` (the task id,
  right-aligned to the widest id). Stripped when most lines of the file carry it; the task id
  is *not* taken as a rank (one task per node under torchrun is common), and Horovod's own
  ``N: [tensor, …]`` report lines never count towards the detection.
- **pdsh** (DeepSpeed's PDSH runner, ``pdsh -w``): ``src/pdsh/dsh.c`` writes ``"%s: "`` (the
  host) in front of every remote line. Stripped when most lines of the file carry one of a few
  host tokens each seen on several lines (a Python exception name, a logging level or a word
  of prose is never a host); the host is no rank.
- **accelerate's subprocess echo** (``accelerate test``, ``test_utils.testing.
  execute_subprocess_async``): ``tee(line, sink, pipe, label)`` prints ``label, line`` —
  ``stdout: …`` / ``stderr: …``. With three labels or more in a file each label starts a line;
  a paste that lost the newlines (one line holding a whole torchelastic summary) is split at
  the labels back into the lines it was.
- **Kubernetes** ``kubectl logs --prefix``: ``[pod/NAME/CONTAINER] `` (stripped);
  ``--timestamps``: RFC 3339 with nanoseconds and ``Z`` (kept, the zone letter dropped so the
  ISO time reads like any other launcher time). GitHub Actions' raw logs carry the same shape
  with 7 fraction digits, and ``##[group]``-style markers (dropped).
- **Ray**: ``(pid=N) ``, ``(pid=N, ip=A) ``, ``(ActorName pid=N, ip=A) ``, ``(raylet[, ip=A]) ``,
  ``(scheduler +1m2s) `` in front and
  `` [repeated Nx across cluster]`` behind (both stripped; a pid is no rank).
- **Polyaxon** ``polyaxon ops logs`` (v1, ``traceml/logging/streamer.py``): ``<local time> | ``
  and with ``--all-info`` ``node | pod | container | `` in front (the names stripped, the time
  kept as an ISO time; a pod's replica index is no rank).
- **Progress bars**: tqdm's ``{l_bar}{bar}| n/total [elapsed<remaining, rate]`` with a log line
  glued behind it (the bar was redrawn with ``\\r`` and the next write did not start a line) is
  split after the bar; ``\\r`` itself is split by the segmenter.
- **Hard wraps at a fixed width** (a terminal, an issue tracker): when at least three lines of
  a file have exactly the same length ``W >= 60`` and none is longer, a line of exactly ``W``
  characters continues on the next (joined with nothing in between: the wrap cut mid-word).
- **Markdown**: code-fence lines (```` ``` ````, ``~~~``), ``<details>``/``<summary>`` lines and
  quote markers (``> ``, when at least a third of the file is quoted) are dropped.

Every normalisation is counted (:data:`KINDS`), and the counts surface in the report's notes.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator

#: the counters a normalisation pass keeps (key -> what the note says)
KINDS: dict[str, str] = {
    "mpi_tag": "Open MPI/PRRTE --tag-output tag(s) read and moved to the line start",
    "mpi_fragment": "tagged fragment(s) glued back into the message they cut",
    "srun_label": "srun --label prefix(es) stripped",
    "k8s_prefix": "kubectl --prefix pod/container prefix(es) stripped",
    "rfc3339": "RFC 3339 timestamp(s) (kubectl --timestamps, GitHub Actions) read as ISO times",
    "ci_marker": "GitHub Actions ##[…] marker line(s) dropped",
    "ray_prefix": "Ray (pid=…, ip=…) prefix(es) or [repeated …] suffix(es) stripped",
    "polyaxon_prefix": "Polyaxon ops logs node/pod/container prefix(es) stripped",
    "progress_bar": "line(s) split after a progress bar glued in front",
    "fixed_wrap": "line(s) hard-wrapped at a fixed width glued back",
    "markdown": "Markdown code-fence / <details> line(s) dropped",
    "pdsh_host": "pdsh 'host: ' prefix(es) stripped",
    "stream_label": "'stdout: '/'stderr: ' label(s) read as line starts (flattened lines split)",
    "quote": "Markdown quote marker(s) stripped",
}

#: any Open MPI / PRRTE tag; ``job`` is ORTE's local jobid, PMIx's jobid or full nspace
_MPI_TAG = re.compile(
    # ORTE's ctime() (no brackets) or PMIx's [ctime] in front of the tag is part of it
    r"(?:\[?(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}\]?)?"
    r"\[(?:(?P<job>[\w.@-]{1,64}),)?(?P<rank>\d{1,7})\](?:\[[\w.-]{1,64}:\d{1,10}\])?"
    r"<(?P<stream>stdout|stderr|stddiag)>:(?P<space> ?)")
#: ORTE's ``ctime()`` and PMIx's ``[ctime]`` in front of a tag
_CTIME = re.compile(r"\[?(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d "
                    r"\d{2}:\d{2}:\d{2} \d{4}\]?")
_ISO_HEAD = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?")
_SRUN = re.compile(r"^ {0,6}(\d{1,6}): ")
#: Horovod's stall report lines (``3: [tensor]``, ``3!: [tensor]``) look like srun labels
_HOROVOD_RANK_LINE = re.compile(r"^\s*\d{1,7}!?: \[(?!rank\d)")
#: pdsh (``src/pdsh/dsh.c``: ``"%s: "`` host, then the remote line); DeepSpeed's PDSH runner
#: and ``dshbak``-less pastes carry it. A host token is a hostname, never a Python exception,
#: a logging level or a word of prose (checked in :func:`_pdsh_file`)
_PDSH = re.compile(r"^([A-Za-z][\w.-]{0,62}): ")
_NOT_HOST = re.compile(r"(?:Error|Exception|Warning|Interrupt|Exit)$|^(?:DEBUG|INFO|WARN|WARNING|"
                       r"ERROR|CRITICAL|FATAL|NOTICE|Note|Hint|Traceback|File|Caused|During|"
                       r"stdout|stderr|http|https)$", re.I)
#: accelerate's ``test_utils.testing.execute_subprocess_async`` echoes each line of the child
#: through ``tee(line, sink, pipe, label)`` = ``print(label, line)``: ``"stderr: " line`` /
#: ``"stdout: " line``. A paste that lost the newlines leaves the labels inside one line; each
#: label then starts a line of its own again
_STREAM_LABEL = re.compile(r"(?:^|(?<=\s))(?:stdout|stderr): ")
_K8S = re.compile(r"^\[pod/[\w.-]{1,253}/[\w.-]{1,63}\] ")
_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)(?:Z|[+-]\d{2}:\d{2}) ")
_TORCH_RANK = re.compile(r"\[rank\d{1,7}\]:")
_CI_MARKER = re.compile(r"^##\[(?:group|endgroup|section|command|debug)\]")
_CI_INLINE = re.compile(r"^##\[(?:error|warning|notice)\]")
#: ``ray/_private/worker.py`` ``print_worker_logs``: ``"({prefix}{pid}[, ip={ip}]) "`` — the
#: prefix ``[actor or task name ]pid=`` for workers, empty for the raylet (pid ``raylet``) and
#: the autoscaler (pid ``scheduler +1m2s``)
_RAY = re.compile(r"^\((?:(?:[A-Za-z_][\w.:-]{0,80} )?pid=\d{1,10}|raylet|scheduler \+\w{1,16})"
                  r"(?:, ip=[\w.:-]{1,64})?\) ")
_RAY_REPEATED = re.compile(r" \[repeated \d{1,9}x across cluster\]\s*$")
#: ``polyaxon ops logs`` (traceml/logging/streamer.py, v1): ``<local datetime> | `` then, with
#: ``--all-info``, ``node | pod | container | `` (str() of an aware datetime: ``+00:00``, which
#: tells it from Python logging's ``asctime | LEVEL | name | `` with no zone)
_POLYAXON = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{1,9})?)"
                       r"[+-]\d{2}:\d{2} \| (?:[\w.-]{1,253} \| ){0,3}")
#: tqdm's default bar: ``{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, …]``
_TQDM = re.compile(r"\d{1,3}%\|[^|\n]{0,200}\| ?[\d.]{1,12}[kMG]?/[\d.?]{1,12}[kMG]? "
                   r"\[[^\]\n]{0,200}\]")
_FENCE = re.compile(r"^\s*(?:```+|~~~+)[\w+.-]{0,30}\s*$|^\s*</?(?:details|summary)\b[^>]{0,80}>"
                    r"(?:[^<]{0,200}</summary>)?\s*$")
_QUOTE = re.compile(r"^(?: {0,3}>)+ ?")
#: a bare separator line (``=====``, ``-----``) is no wrapped text
_SEPARATOR = re.compile(r"^(.)\1+$")
#: a line that starts a record of its own is never the continuation of a wrapped one
_STARTS_RECORD = re.compile(r"^(?:\s|\[|\(|\d{4}-\d{2}-\d{2}|[EWIF]\d{4} |Traceback|File \"|"
                            r"[\w.-]{1,64}:\d{1,10}:\d{1,10} \[|$)")
MIN_WRAP = 60
#: every pattern here reads at most this much of a physical line (the segmenter then cuts at its
#: own, smaller limit and counts the cut), and a message glued from fragments stops growing at
#: :data:`MAX_MESSAGE`: a hostile file costs linear time whatever its lines hold
MAX_RAW = 65_536
MAX_MESSAGE = 16_384
#: a line starting with the same characters as the line before it repeats it, not continues it
_SAME_START = 12


def notes(counts: Counter[str]) -> list[str]:
    """One report note per normalisation that applied, with its count."""
    return [f"normalised: {counts[k]} × {what}" for k, what in KINDS.items() if counts[k]]


class Paste:
    """One file's normalisation: :meth:`lines` yields ``(line number, text)``; :attr:`counts`."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def lines(self, text: str) -> Iterator[tuple[int, str]]:
        raw = [ln if len(ln) <= MAX_RAW else ln[:MAX_RAW] for ln in text.split("\n")]
        quoted = _quoted_file(raw)
        srun = _srun_file(raw)
        pdsh = not srun and _pdsh_file(raw)
        labels = _labelled_file(raw)
        wrap = _wrap_width(raw)
        stream = self._unwrap(self._strip(raw, quoted, srun, pdsh, labels), wrap)
        yield from self._untag(stream)

    # --- per-line wrappers ----------------------------------------------------------------
    def _strip(self, raw: list[str], quoted: bool, srun: bool, pdsh: bool = False,
               labels: bool = False) -> Iterator[tuple[int, str]]:
        count = self.counts
        for no, line in enumerate(raw, 1):
            line = line.removesuffix("\r")
            if quoted and line.lstrip().startswith(">"):
                line = _QUOTE.sub("", line, count=1)
                count["quote"] += 1
            if _FENCE.match(line):
                count["markdown"] += 1
                continue
            if line.startswith("##["):
                if _CI_MARKER.match(line):
                    count["ci_marker"] += 1
                    continue
                line = _CI_INLINE.sub("", line, count=1)
            if line.startswith("[pod/"):
                line, n = _K8S.subn("", line, count=1)
                count["k8s_prefix"] += n
            if line[:4].isdigit() and "T" in line[:11] and (m := _RFC3339.match(line)):
                count["rfc3339"] += 1
                rest = line[m.end():]
                if _CI_MARKER.match(rest):  # GitHub Actions: the time, then the marker
                    count["ci_marker"] += 1
                    continue
                rest = _CI_INLINE.sub("", rest, count=1)
                # torch's own [rankN]: goes first, so the segmenter keeps the time with the line
                r = _TORCH_RANK.match(rest)
                line = (rest[:r.end()] + m.group(1) + " " + rest[r.end():] if r
                        else m.group(1) + " " + rest)
            if srun:
                line, n = _SRUN.subn("", line, count=1)
                count["srun_label"] += n
            if pdsh and (h := _PDSH.match(line)) and not _NOT_HOST.search(h.group(1)):
                line = line[h.end():]
                count["pdsh_host"] += 1
            if labels and ("stderr: " in line or "stdout: " in line):
                pieces = _STREAM_LABEL.split(line)
                count["stream_label"] += len(pieces) - 1
                for piece in pieces[:-1]:
                    if piece.strip():
                        yield no, piece.rstrip()
                line = pieces[-1]
            if line.startswith("(") and ("pid=" in line[:120]
                                         or line.startswith(("(raylet", "(scheduler +"))):
                line, n = _RAY.subn("", line, count=1)
                count["ray_prefix"] += n
            if line.endswith("across cluster]"):
                line, n = _RAY_REPEATED.subn("", line)
                count["ray_prefix"] += n
            if " | " in line[:300] and line[:4].isdigit():
                line, n = _POLYAXON.subn(r"\1 ", line, count=1)
                count["polyaxon_prefix"] += n
            if "%|" in line:
                yield from self._split_bar(no, line)
                continue
            yield no, line

    def _split_bar(self, no: int, line: str) -> Iterator[tuple[int, str]]:
        """A progress bar with a log line glued behind it: two lines (the bar's ``\\r``
        redraws are split later by the segmenter)."""
        start = 0
        for m in _TQDM.finditer(line):
            rest = line[m.end():]
            if rest.strip() and not rest.startswith("\r"):
                yield no, line[start:m.end()]
                start = m.end()
                self.counts["progress_bar"] += 1
        yield no, line[start:]

    def _unwrap(self, lines: Iterator[tuple[int, str]], width: int | None
                ) -> Iterator[tuple[int, str]]:
        """Glue lines hard-wrapped at ``width`` (a line of exactly that length continues)."""
        if width is None:
            yield from lines
            return
        held: tuple[int, list[str]] | None = None
        size = 0
        for no, line in lines:
            if held is not None and not _continues(held[1][-1], line):
                yield held[0], "".join(held[1])
                held = None
            if held is not None:
                held[1].append(line)
                size += len(line)
                self.counts["fixed_wrap"] += 1
                if len(line) != width or size > 16_384:
                    yield held[0], "".join(held[1])
                    held = None
                continue
            if len(line) == width and not _SEPARATOR.match(line):
                held, size = (no, [line]), len(line)
            else:
                yield no, line
        if held is not None:
            yield held[0], "".join(held[1])

    # --- Open MPI tags ----------------------------------------------------------------------
    def _untag(self, lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
        """Read every ``--tag-output`` tag: fragments of one tag are glued back (in order, across
        physical lines) and each finished message starts its own line with its tag."""
        pending: dict[tuple[str, str, str], tuple[int, str, list[str], int]] = {}
        pmix: bool | None = None  # PMIx puts a space after the tag, ORTE does not
        for no, line in lines:
            if ">:" not in line or not (tags := list(_MPI_TAG.finditer(line))):
                yield no, line
                continue
            head = line[:tags[0].start()]
            keep = _launcher_time(head)
            if head.strip() and not keep and not _launcher_prefix(head):
                # text before the first tag that is no launcher prefix: a fragment of its own
                # (an untagged write, e.g. the launcher's own) — kept as its own line
                yield no, head
            for i, m in enumerate(tags):
                self.counts["mpi_tag"] += 1
                end = tags[i + 1].start() if i + 1 < len(tags) else len(line)
                if pmix is None:
                    pmix = bool(m.group("space"))
                body = line[m.end() if pmix else m.start("space"):end]
                key = (m.group("job") or "", m.group("rank"), m.group("stream"))
                last = i + 1 == len(tags)
                if key in pending and pending[key][3] + len(body) <= MAX_MESSAGE:
                    first_no, tag, parts, size = pending.pop(key)
                    parts.append(body)
                    size += len(body)
                    self.counts["mpi_fragment"] += 1
                else:
                    if key in pending:  # grown past MAX_MESSAGE: what it holds is let go
                        old_no, old_tag, old_parts, _ = pending.pop(key)
                        yield old_no, old_tag + "".join(old_parts)
                    first_no = no
                    tag = _canonical_tag(m)
                    parts = [keep + " " if keep else "", body]
                    size = len(body)
                if last:  # the chunk ended at this line's newline: the message is whole
                    yield first_no, tag + "".join(parts)
                else:  # the next tag cut this chunk: it goes on in this tag's next fragment
                    pending[key] = (first_no, tag, parts, size)
        for first_no, tag, parts, _ in pending.values():
            yield first_no, tag + "".join(parts)


def _canonical_tag(m: re.Match[str]) -> str:
    """The tag in ORTE's own form (``[jobid,rank]<stdout|stderr>:``), which the parser reads the
    rank from; a PMIx nspace or ``stddiag`` is written in that form too."""
    job = m.group("job")
    job = f"{job}," if job and job.isdigit() else ""
    stream = "stdout" if m.group("stream") == "stdout" else "stderr"
    return f"[{job}{m.group('rank')}]<{stream}>:"


def _launcher_time(head: str) -> str:
    m = _ISO_HEAD.search(head)
    return m.group(0) if m else ""


def _launcher_prefix(head: str) -> bool:
    """Text in front of a tag that a launcher or collector puts there (a time, a host)."""
    h = head.strip()
    return bool(_CTIME.search(h) or _ISO_HEAD.search(h)) or bool(
        re.fullmatch(r"[\w.-]{1,64}:?|\[[^\]]{1,80}\]:?", h))


def _quoted_file(raw: list[str]) -> bool:
    """A pasted Markdown quote: at least a third of the non-empty lines start with ``>``."""
    lines = [ln for ln in raw[:4096] if ln.strip()]
    quoted = sum(ln.lstrip().startswith(">") and not ln.lstrip().startswith(">>>")
                 for ln in lines)
    return bool(lines) and quoted >= 2 and 3 * quoted >= len(lines)


def _srun_file(raw: list[str]) -> bool:
    """``srun --label`` output: most non-empty lines start with ``N: `` (Horovod's report lines
    excluded from the count)."""
    lines = [ln for ln in raw[:4096] if ln.strip()]
    labelled = sum(bool(_SRUN.match(ln)) and not _HOROVOD_RANK_LINE.match(ln) for ln in lines)
    return labelled >= 3 and 2 * labelled >= len(lines)


def _pdsh_file(raw: list[str]) -> bool:
    """pdsh output: most non-empty lines start with ``host: ``, from a few hosts each seen on
    several lines (prose, exceptions and levels never count as hosts)."""
    lines = [ln for ln in raw[:4096] if ln.strip()]
    hosts = Counter(m.group(1) for ln in lines if (m := _PDSH.match(ln))
                    and not _NOT_HOST.search(m.group(1)))
    labelled = sum(hosts.values())
    return (labelled >= 3 and 2 * labelled >= len(lines) and max(hosts.values()) >= 2
            and 2 * len(hosts) <= labelled)


def _labelled_file(raw: list[str]) -> bool:
    """accelerate's ``stdout: ``/``stderr: `` echo: at least three labels in the file, on line
    starts or (a flattened paste) after whitespace inside a line."""
    total = 0
    for ln in raw[:4096]:
        if "stderr: " in ln or "stdout: " in ln:
            total += len(_STREAM_LABEL.findall(ln))
            if total >= 3:
                return True
    return False


def _wrap_width(raw: list[str]) -> int | None:
    """The width a terminal or tracker hard-wrapped this file at, when the lengths show one:
    at least three non-separator lines of exactly the longest length ``W >= 60``."""
    head = [ln.removesuffix("\r") for ln in raw[:65536]]
    lengths = Counter(len(ln) for ln in head if not _SEPARATOR.match(ln.strip() or "x"))
    if not lengths:
        return None
    width = max(lengths)
    if width < MIN_WRAP or lengths[width] < 3:
        return None
    # the width is shown by cuts *mid-word* (a letter or digit on both sides of the break) into a
    # line that starts no record of its own; a message repeated by many ranks or a redrawn
    # progress bar has the same length too, but is cut at no word and repeats its own start
    goes_on = sum(_continues(a, b) and a[-1].isalnum() and b[:1].isalnum()
                  for a, b in itertools.pairwise(head) if len(a) == width)
    return width if goes_on >= 2 else None


def _continues(piece: str, line: str) -> bool:
    """``line`` may go on where ``piece`` (a line of the wrap width) was cut."""
    return bool(line) and not _SEPARATOR.match(piece) and not _STARTS_RECORD.match(line) \
        and piece[:_SAME_START] != line[:_SAME_START]
