"""The Prometheus HTTP query API, as every TSDB reader of the analyzer uses it.

One client for Prometheus, VictoriaMetrics, Mimir, Thanos and Cortex: instant and range queries,
raw samples at their own timestamps, label values and series, with every failure an
:class:`EndpointError` naming the endpoint. It is written for cluster scale:

* **Within the server's default limits.** A ``/api/v1/series`` answer refused as too large
  (VictoriaMetrics ``-search.maxSeries`` 30,000; Mimir ``max_fetched_series_per_query``) is
  split by the values of a label (the rank) and asked again in smaller sets; a range read
  refused for too many points or samples (Prometheus ``query.max-samples``, VictoriaMetrics
  ``-search.maxPointsPerTimeseries`` / ``-search.maxSamplesPerQuery``) is halved in time. A
  "too many" answer leads to smaller questions, never to a failed run.
* **Typed decode straight into arrays.** A matrix answer is decoded by msgspec into typed
  structs whose sample pairs become two numpy columns in one C-level pass for the whole answer;
  only an answer of an unexpected shape (a label that is not a string, a value such as
  ``"+Inf"``) takes the general path, which counts what it cannot read.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import httpx
import msgspec
import numpy as np
from stormotel.analyzers.http import Deadline, EndpointError, HttpSettings, request

_T = TypeVar("_T")

#: Prometheus refuses query_range answers over 11,000 points per series; stay below it.
MAX_POINTS_PER_QUERY = 10_000
#: Timestamps at or past this (year ~2262) do not fit int64 nanoseconds.
MAX_UNIX_S = 9.2e9
#: How many times a refused question is split before the refusal stands.
MAX_SPLITS = 8
#: Label values per ``=~`` alternation when a series query is split. Few and large sets: on a
#: freshly started VictoriaMetrics each listing request costs ~0.13 s of index work whatever
#: its rank set (measured: it follows the spellings' ``__name__`` alternation, not the ranks
#: asked), so 10,000 ranks listed 500 at a time cost it 3.7 s of CPU, 1,500 at a time 2.1 s
#: (docs/benchmarks.md). Bounded by the server's limits: at a tracker's 14 series per rank
#: 21,000 series of the 30,000 ``-search.maxSeries`` (a refused set is halved), and with
#: six-digit ranks and every spelling ~12 KiB, under the 16 KiB ``-search.maxQueryLen``
#: VictoriaMetrics puts on queries.
SPLIT_VALUES = 1500

#: A server's refusal of a question that is too large (Prometheus 422 "too many samples",
#: VictoriaMetrics 422 "exceeds -search.max…", Mimir 422 "exceeded the maximum number of …").
_TOO_LARGE = re.compile(r"points|resolution|samples|too many|exceed|limit|maximum",
                        re.IGNORECASE)


def is_too_large(e: EndpointError) -> bool:
    """True when the server refused the question for its size (so a smaller one may pass)."""
    return e.status in (400, 422) and bool(_TOO_LARGE.search(e.body or ""))


def label_selector(matchers: dict[str, str], regex: dict[str, str] | None = None,
                   extra: str = "") -> str:
    """``{a="x",b=~"y|z",<extra>}`` with values escaped for PromQL string literals."""
    parts = [f'{k}="{escape(v)}"' for k, v in matchers.items()]
    parts += [f'{k}=~"{escape(v)}"' for k, v in (regex or {}).items()]
    if extra.strip():
        parts.append(extra.strip().strip("{}"))
    return "{" + ",".join(parts) + "}"


def escape(value: str) -> str:
    """A value as the inside of a PromQL string literal."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def name_regex(names: Iterable[str]) -> str:
    return "|".join(re.escape(n) for n in names)


def values_regex(values: Iterable[str]) -> str:
    """An alternation matching exactly these label values."""
    return "|".join(re.escape(v) for v in values)


def with_matcher(selector: str, matcher: str) -> str:
    """``{a="x"}`` + ``b=~"y"`` → ``{a="x",b=~"y"}``."""
    inner = selector.strip().strip("{}").strip()
    return "{" + (inner + "," if inner else "") + matcher + "}"


def parse_matrix_values(values: Sequence[Sequence[object]]) -> tuple[np.ndarray, np.ndarray]:
    """``[[unix_s, "v"], ...]`` → (int64 ns at ms precision, float64 values).

    Two C-level passes (``fromiter`` for times, numpy's string→float conversion for values);
    raises ValueError on anything that is not a list of [number, "number"] pairs.
    """
    n = len(values)
    if not n:
        return np.empty(0, np.int64), np.empty(0)
    try:
        t = np.fromiter((p[0] for p in values), dtype=np.float64, count=n)
        v = np.array([p[1] for p in values], dtype=np.float64)
    except (TypeError, IndexError, KeyError) as e:
        raise ValueError(f"matrix values are not [timestamp, value] pairs ({e})") from None
    if v.shape != (n,):
        raise ValueError("matrix values are not [timestamp, value] pairs")
    return _checked_ns(t), v


def _checked_ns(t: np.ndarray) -> np.ndarray:
    if not (np.isfinite(t).all() and (t > 0).all() and (t < MAX_UNIX_S).all()):
        raise ValueError("matrix timestamps are not positive Unix times in seconds")
    return np.rint(t * 1000.0).astype(np.int64) * 1_000_000


@dataclass
class Series:
    """One series of a matrix answer, decoded.

    ``labels`` is None for an entry of the wrong shape (no label map or no value list);
    ``t_ns``/``v`` are None when its values are not [timestamp, "number"] pairs. The readers
    count either as ``malformed_series`` where they did before.
    """

    labels: dict[str, str] | None
    t_ns: np.ndarray | None
    v: np.ndarray | None
    #: Every value is a finite non-negative number (nothing for a byte reader to drop).
    clean: bool = False


class _Pairs(msgspec.Struct):
    metric: dict[str, str]
    values: list[tuple[float, float]]


class _RawPairs(msgspec.Struct):
    metric: dict[str, str]
    #: The ``[[t, "v"], …]`` text as it came, read by :func:`_flat_pairs`.
    values: msgspec.Raw


class _RawMatrixData(msgspec.Struct):
    result: list[_RawPairs]


class _RawMatrixAnswer(msgspec.Struct):
    status: str
    data: _RawMatrixData


class _MatrixData(msgspec.Struct):
    result: list[_Pairs]


class _MatrixAnswer(msgspec.Struct):
    status: str
    data: _MatrixData


class _Vector(msgspec.Struct):
    metric: dict[str, str]
    value: tuple[float, float]


class _VectorData(msgspec.Struct):
    result: list[_Vector]


class _VectorAnswer(msgspec.Struct):
    status: str
    data: _VectorData


class _SeriesAnswer(msgspec.Struct):
    status: str
    data: list[dict[str, str]]


class _ListAnswer(msgspec.Struct):
    status: str
    data: list[object]


# strict=False: sample values are JSON strings ("123", "NaN"); msgspec reads them as floats.
_MATRIX = msgspec.json.Decoder(_MatrixAnswer, strict=False)
_VECTOR = msgspec.json.Decoder(_VectorAnswer, strict=False)
_LIST = msgspec.json.Decoder(_ListAnswer)
_SERIES = msgspec.json.Decoder(_SeriesAnswer)
_RAW_MATRIX = msgspec.json.Decoder(_RawMatrixAnswer)
#: Strict: a JSON number or the answer is not flat (a bare NaN is not JSON).
_NUMBERS = msgspec.json.Decoder(list[float])


class _Answer(Protocol):
    status: str


_A = TypeVar("_A", bound=_Answer)


def _success(decoder: msgspec.json.Decoder[_A], body: bytes) -> _A | None:
    """The typed answer when ``body`` decodes and says ``success``; else None, and the caller
    takes its general path (which reads errors, odd shapes and failures as they are)."""
    try:
        doc = decoder.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError):  # bad UTF-8: not msgspec's DecodeError
        return None
    return doc if doc.status == "success" else None


def _fast_matrix(body: bytes) -> list[Series] | None:
    """Every series of a well-formed matrix answer as arrays, or None when the answer needs
    the general path. The flat reading first (the usual answer: every value a plain number),
    else the typed one (values such as ``"NaN"``), else None."""
    got = _flat_pairs(body)
    if got is None:
        got = _typed_pairs(body)
    if got is None:
        return None
    metrics, counts, flat = got
    pairs = flat.reshape(-1, 2)
    values = pairs[:, 1].copy()
    # Checked once for the whole answer (the usual case: every timestamp valid, every value a
    # finite non-negative number); series by series only when something is off.
    try:
        stamps: np.ndarray | None = _checked_ns(pairs[:, 0])
    except ValueError:
        stamps = None
    clean = stamps is not None and bool(np.isfinite(values).all() and (values >= 0).all())
    out = []
    at = 0
    for metric, n in zip(metrics, counts, strict=True):
        if stamps is not None:
            out.append(Series(metric, stamps[at:at + n], values[at:at + n], clean))
        else:
            try:
                out.append(Series(metric, _checked_ns(pairs[at:at + n, 0]),
                                  values[at:at + n]))
            except ValueError:
                out.append(Series(metric, None, None))
        at += n
    return out


_Flat = tuple[list[dict[str, str]], list[int], np.ndarray]


def _typed_pairs(body: bytes) -> _Flat | None:
    """Labels, pairs per series and every pair flattened, through a tuple per pair (reads
    string values such as ``"NaN"``; ~3x the cost of :func:`_flat_pairs`)."""
    doc = _success(_MATRIX, body)
    if doc is None:
        return None
    result = doc.data.result
    counts = [len(s.values) for s in result]
    flat = np.fromiter(itertools.chain.from_iterable(
        itertools.chain.from_iterable(s.values for s in result)), dtype=np.float64,
        count=2 * sum(counts))
    return [s.metric for s in result], counts, flat


def _flat_pairs(body: bytes) -> _Flat | None:
    """:func:`_typed_pairs` without a Python tuple per pair: msgspec keeps each series' values
    as raw JSON text; once every series is checked to be exactly ``[[a,b],[c,d],…]`` (by its
    brackets and commas alone), the quotes and brackets are dropped and the numbers read as
    flat lists. None when the answer is anything else (a value that is not a plain number,
    such as ``"NaN"``, a stray bracket or comma inside a string).

    The numbers are read a group of series at a time (~``NUMBERS_GROUP_BYTES`` of text): the
    Python floats of one group are made, copied into an array and freed while they are still
    in the CPU's cache, a fifth less time than one list for the whole answer."""
    doc = _success(_RAW_MATRIX, body)
    if doc is None:
        return None
    raws = [bytes(s.values) for s in doc.data.result]
    counts = []
    for r in raws:
        shape = r.translate(None, _NOT_DELIMITER)
        n = (len(shape) - 1) // 4  # "[[,]]" is 5 long, each further pair adds "[,],"
        if shape != _pairs_shape(n):
            return None
        counts.append(n)
    arrays: list[np.ndarray] = []
    group: list[bytes] = []
    size = 0
    last = len(raws) - 1
    for i, (r, n) in enumerate(zip(raws, counts, strict=True)):
        if n:
            group.append(r)
            size += len(r)
        if group and (size >= NUMBERS_GROUP_BYTES or i == last):
            text = b",".join(group).translate(None, b'[]"')
            try:
                numbers = _NUMBERS.decode(b"[" + text + b"]")
            except (msgspec.DecodeError, UnicodeDecodeError):
                return None
            arrays.append(np.fromiter(numbers, dtype=np.float64, count=len(numbers)))
            del numbers
            group, size = [], 0
    flat = (arrays[0] if len(arrays) == 1 else np.concatenate(arrays) if arrays
            else np.empty(0, np.float64))
    if flat.size != 2 * sum(counts):  # cannot differ after the shape check; never guess
        return None
    return [s.metric for s in doc.data.result], counts, flat


#: Text per group of series whose numbers are read together (see :func:`_flat_pairs`).
NUMBERS_GROUP_BYTES = 192 * 1024
_NOT_DELIMITER = bytes(c for c in range(256) if c not in b"[],")
_SHAPES: dict[int, bytes] = {}


def _pairs_shape(n: int) -> bytes:
    """The brackets and commas of a list of ``n`` pairs: ``[[,],[,]]`` for two."""
    shape = _SHAPES.get(n)
    if shape is None:
        shape = b"[]" if n <= 0 else b"[" + b"[,]," * (n - 1) + b"[,]]"
        if len(_SHAPES) < 4096:
            _SHAPES[n] = shape
    return shape


def series_from_dicts(results: list[dict[str, object]]) -> list[Series]:
    """The general path: decoded JSON entries as :class:`Series`, bad shapes marked."""
    out = []
    for r in results:
        labels, values = r.get("metric"), r.get("values")
        if not isinstance(labels, dict) or not isinstance(values, list):
            out.append(Series(None, None, None))
            continue
        strs = {str(k): str(v) for k, v in labels.items()}
        try:
            t_ns, v = parse_matrix_values(values)
        except (ValueError, TypeError):
            out.append(Series(strs, None, None))
            continue
        out.append(Series(strs, t_ns, v))
    return out


# --- instant-vector values (the TSDB's answer about what a run wrote) ------------------------
class _InstantSample(msgspec.Struct):
    """One instant-vector sample: ``value`` is ``[time, "seconds since the epoch"]``."""

    value: tuple[float, str]


class _InstantData(msgspec.Struct):
    result: list[object] = []


class _InstantAnswer(msgspec.Struct):
    data: _InstantData = msgspec.field(default_factory=_InstantData)


def instant_entries(doc: object) -> list[object]:
    """The result entries of an instant-query answer (``/api/v1/query``), each still to be
    decoded by its reader (an entry is input); ValidationError when the answer is no answer."""
    return msgspec.convert(doc, _InstantAnswer).data.result


def sample_values(doc: object) -> list[float]:
    """The finite values of an instant-vector answer (``/api/v1/query``), typed-decoded: an
    answer or entry of the wrong shape, a value that is not a number, NaN or infinite is left
    out (a server's answer is input). ValidationError when the answer itself is no answer."""
    out = []
    for entry in instant_entries(doc):
        try:
            value = float(msgspec.convert(entry, _InstantSample).value[1])
        except (msgspec.ValidationError, ValueError):
            continue
        if math.isfinite(value):
            out.append(value)
    return out


class PrometheusAPI:
    """One endpoint's query API. Every failure becomes :class:`EndpointError` naming it."""

    def __init__(self, url: str, client: httpx.Client, settings: HttpSettings,
                 deadline: Deadline | None = None, method: str = "POST") -> None:
        self.url = url.rstrip("/")
        self.client = client
        self.settings = settings
        self.deadline = deadline or Deadline(None)
        #: POST keeps long selectors out of URLs; GET where a caller always used it.
        self.method = method

    def _send(self, path: str, params: dict[str, object], *,
              api_errors: bool = True) -> httpx.Response:
        """The answer; a failure names the endpoint (and, with ``api_errors``, the API's own
        error text instead of the raw body)."""
        url = self.url + path
        if not api_errors:
            return self._request(url, params)
        try:
            return self._request(url, params)
        except EndpointError as e:
            raise EndpointError(url, _api_error_text(e.body) or str(e).split(": ", 1)[-1],
                                status=e.status, body=e.body) from None

    def _request(self, url: str, params: dict[str, object]) -> httpx.Response:
        if self.method == "GET":
            return request(self.client, "GET", url, settings=self.settings,
                           deadline=self.deadline, params=params, ok_statuses=(200,))
        return request(self.client, "POST", url, settings=self.settings,
                       deadline=self.deadline, data=params, ok_statuses=(200,))

    def instant_response(self, expr: str, time_ns: int) -> httpx.Response:
        """An instant query's answer as it came (the caller decodes it typed); a failure is
        the HTTP client's :class:`EndpointError` (status and body as the server gave them)."""
        return self._send("/api/v1/query", {"query": expr, "time": _sec(time_ns)},
                          api_errors=False)

    def _call(self, path: str, params: dict[str, object]) -> object:
        return _data_of(self._send(path, params), self.url + path)

    # --- metadata --------------------------------------------------------------------------

    def series(self, selector: str, start_ns: int, end_ns: int) -> list[dict[str, str]]:
        resp = self._send("/api/v1/series", {"match[]": selector, "start": _sec(start_ns),
                                             "end": _sec(end_ns)})
        # typed first: 140,000 label maps for a 10,000-rank job
        typed = _success(_SERIES, resp.content)
        if typed is not None:
            return typed.data
        data = _data_of(resp, self.url + "/api/v1/series")
        if not isinstance(data, list):
            raise EndpointError(self.url + "/api/v1/series", "series data is not a list")
        return [d for d in data if isinstance(d, dict)]

    def label_values(self, label: str, selector: str, start_ns: int, end_ns: int) -> list[str]:
        """Values of ``label`` among the series ``selector`` matches in the window."""
        path = f"/api/v1/label/{label}/values"
        params: dict[str, object] = {"start": _sec(start_ns), "end": _sec(end_ns)}
        if selector:  # none: every value in the window (the index alone answers)
            params["match[]"] = selector
        resp = self._send(path, params)
        try:
            doc = _LIST.decode(resp.content)
        except (msgspec.DecodeError, UnicodeDecodeError) as e:
            raise EndpointError(self.url + path, f"not a label values answer ({e})") from None
        if doc.status != "success":
            raise EndpointError(self.url + path, f"status {doc.status!r}")
        return [v for v in doc.data if isinstance(v, str)]

    def series_split(self, selector: str, start_ns: int, end_ns: int, split_label: str,
                     sort_key: Callable[[str], Any] = str) -> list[dict[str, str]]:
        """``series(selector)``, split by the values of ``split_label`` when the server refuses
        the whole answer as too large (then series without that label are asked for with
        ``split_label=""``). Same series, in several answers of bounded size."""
        try:
            return self.series(selector, start_ns, end_ns)
        except EndpointError as e:
            if not is_too_large(e):
                raise
        values = sorted(set(self.label_values(split_label, selector, start_ns, end_ns)),
                        key=sort_key)
        out = self.series(with_matcher(selector, f'{split_label}=""'), start_ns, end_ns)
        for i in range(0, len(values), SPLIT_VALUES):
            out += self._series_values(selector, split_label, values[i:i + SPLIT_VALUES],
                                       start_ns, end_ns, 0)
        return out

    def _series_values(self, selector: str, label: str, values: list[str], start_ns: int,
                       end_ns: int, depth: int) -> list[dict[str, str]]:
        sel = with_matcher(selector, f'{label}=~"{escape(values_regex(values))}"')
        try:
            return self.series(sel, start_ns, end_ns)
        except EndpointError as e:
            if not (is_too_large(e) and len(values) > 1 and depth < 2 * MAX_SPLITS):
                raise
        half = len(values) // 2
        return (self._series_values(selector, label, values[:half], start_ns, end_ns, depth + 1)
                + self._series_values(selector, label, values[half:], start_ns, end_ns,
                                      depth + 1))

    # --- instant queries -------------------------------------------------------------------

    def query(self, expr: str, time_ns: int) -> list[dict[str, object]]:
        data = self._call("/api/v1/query", {"query": expr, "time": _sec(time_ns)})
        return _result_list(data, self.url + "/api/v1/query")

    def vector(self, expr: str, time_ns: int) -> list[tuple[dict[str, str], float]]:
        """An instant vector as (labels, value) for each entry that has a string label map and
        a numeric value (NaN included; entries of other shapes are passed over)."""
        resp = self._send("/api/v1/query", {"query": expr, "time": _sec(time_ns)})
        doc = _success(_VECTOR, resp.content)
        if doc is not None:
            return [(e.metric, e.value[1]) for e in doc.data.result]
        out = []
        for r in _result_list(_data_of(resp, self.url + "/api/v1/query"),
                              self.url + "/api/v1/query"):
            labels, value = r.get("metric"), r.get("value")
            try:
                v = float(value[1])  # type: ignore[index]
            except (TypeError, ValueError, IndexError, KeyError):
                continue
            if isinstance(labels, dict):
                out.append(({str(k): str(x) for k, x in labels.items()}, v))
        return out

    # --- raw samples and ranges ------------------------------------------------------------

    def query_raw(self, selector: str, start_s: float, end_s: float, chunk_s: float,
                  depth: int = 0) -> list[dict[str, object]]:
        """Every stored sample of ``selector`` in ``[start_s, end_s]`` as the answer's JSON
        entries (:meth:`query_raw_series` gives arrays)."""
        where = self.url + "/api/v1/query"
        return self._raw(selector, start_s, end_s, chunk_s, depth,
                         lambda resp, t_ms: _after(_result_list(_data_of(resp, where), where),
                                                   t_ms))

    def query_raw_series(self, selector: str, start_s: float, end_s: float,
                         chunk_s: float, *, split_time: bool = True) -> list[Series]:
        """Every stored sample of ``selector`` in ``[start_s, end_s]`` at its own timestamp:
        range-vector instant queries over consecutive chunks ``(a, b]`` of ``chunk_s``. Ranges
        are closed in Prometheus 2 and left-open in VictoriaMetrics and Prometheus 3, so each
        chunk asks for all of ``[a, b]`` and drops a sample at ``a`` (the previous chunk's).
        A chunk refused as too large is halved (unless ``split_time`` is False: the caller
        splits by series first)."""
        return self._raw(selector, start_s, end_s, chunk_s, 0 if split_time else MAX_SPLITS,
                         self._decode_raw)

    def _decode_raw(self, resp: httpx.Response, t_ms: int) -> list[Series]:
        fast = _fast_matrix(resp.content)
        if fast is not None:
            out = [_trim(s, t_ms) for s in fast]
        else:
            where = self.url + "/api/v1/query"
            out = series_from_dicts(_after(_result_list(_data_of(resp, where), where), t_ms))
        return drop_staleness_markers(out) if is_raw_export_answer(resp) else out

    def _raw(self, selector: str, start_s: float, end_s: float, chunk_s: float, depth: int,
             decode: Callable[[httpx.Response, int], list[_T]]) -> list[_T]:
        out: list[_T] = []
        chunk_ms = max(2, int(chunk_s * 1000))
        end_ms = math.ceil(end_s * 1000)
        t_ms = int(start_s * 1000) - 1  # each chunk is (t_ms, upto]: the start is included
        while t_ms < end_ms:
            upto = min(end_ms, t_ms + chunk_ms)
            try:
                resp = self._send("/api/v1/query", {"query": f"{selector}[{upto - t_ms}ms]",
                                                    "time": f"{upto / 1000:.3f}"})
            except EndpointError as e:
                if is_too_large(e) and depth < MAX_SPLITS and upto - t_ms >= 4:
                    out.extend(self._raw(selector, t_ms / 1000, upto / 1000,
                                         (upto - t_ms) / 2000, depth + 1, decode))
                    t_ms = upto
                    continue
                raise
            out.extend(decode(resp, t_ms))
            t_ms = upto
        return out

    def query_range(self, expr: str, start_s: float, end_s: float, step_s: float,
                    *, max_points: int = MAX_POINTS_PER_QUERY,
                    on_chunk: Callable[[], None] | None = None) -> list[dict[str, object]]:
        """Fetch ``[start_s, end_s]`` in chunks of at most ``max_points`` per series.

        If the server still refuses a chunk as too large (a lower limit than ours, e.g.
        VictoriaMetrics' ``-search.maxPointsPerTimeseries``), the chunk is halved and retried.
        """
        out: list[dict[str, object]] = []
        span = step_s * (max_points - 1)
        chunk_start = start_s
        while chunk_start <= end_s:
            chunk_end = min(end_s, chunk_start + span)
            out.extend(self._range_chunk(expr, chunk_start, chunk_end, step_s, depth=0))
            if on_chunk:
                on_chunk()
            chunk_start = chunk_end + step_s
        return out

    def _range_chunk(self, expr: str, start_s: float, end_s: float, step_s: float,
                     depth: int) -> list[dict[str, object]]:
        try:
            data = self._call("/api/v1/query_range", {"query": expr, "start": f"{start_s:.3f}",
                                                      "end": f"{end_s:.3f}",
                                                      "step": f"{step_s:.3f}"})
        except EndpointError as e:
            if is_too_large(e) and depth < MAX_SPLITS and end_s - start_s >= 2 * step_s:
                n = int((end_s - start_s) / step_s)
                mid = start_s + (n // 2) * step_s
                return (self._range_chunk(expr, start_s, mid, step_s, depth + 1)
                        + self._range_chunk(expr, mid + step_s, end_s, step_s, depth + 1))
            raise
        return _result_list(data, self.url + "/api/v1/query_range")


#: The Content-Type of VictoriaMetrics' export handler, which answers a range-vector instant
#: query (``m[d]``) with the stored samples (``app/vmselect/prometheus`` ``QueryHandler`` ->
#: ``exportHandler(..., "promapi")``, v1.3x to v1.1xx); Prometheus, Thanos and Mimir answer
#: ``application/json`` from their PromQL engine.
RAW_EXPORT_TYPE = "application/stream+json"


def is_raw_export_answer(resp: httpx.Response) -> bool:
    """True for an answer of VictoriaMetrics' export handler (:data:`RAW_EXPORT_TYPE`): its
    samples are the stored ones, staleness markers included."""
    return resp.headers.get("content-type", "").lower().startswith(RAW_EXPORT_TYPE)


def drop_staleness_markers(series: list[Series]) -> list[Series]:
    """The samples of a VictoriaMetrics raw answer without its staleness markers.

    Prometheus' engine drops a staleness marker from every range vector (``promql/engine.go``
    ``matrixIterSlice``: ``value.IsStaleNaN`` -> skipped), so its query API never prints
    one; a ``"NaN"`` there is a NaN a client wrote, and the readers count it as a bad sample.
    VictoriaMetrics answers ``m[d]`` with its stored samples, the marker printed ``"NaN"``
    (its bit pattern is lost in the text), and it stores no other NaN: ``Storage.add``
    (``lib/storage/storage.go``) drops every NaN but ``decimal.IsStaleNaN`` on ingestion. So
    every NaN of such an answer is a marker — the end of a series (its target went away), no
    sample and no damage — and is dropped as remote read and the bulk exports drop it."""
    out = []
    for s in series:
        if s.t_ns is not None and s.v is not None and not s.clean:
            keep = ~np.isnan(s.v)
            if not keep.all():
                s = Series(s.labels, s.t_ns[keep], s.v[keep],
                           bool(np.isfinite(s.v[keep]).all() and (s.v[keep] >= 0).all()))
        out.append(s)
    return out


def _trim(s: Series, t_ms: int) -> Series:
    """Drop the leading samples at or before ``t_ms`` (the previous chunk's), as :func:`_after`
    does for JSON entries."""
    if s.t_ns is None or s.v is None or not s.t_ns.size or s.t_ns[0] > t_ms * 1_000_000:
        return s
    later = s.t_ns > t_ms * 1_000_000
    i = int(np.argmax(later)) if later.any() else s.t_ns.size
    return Series(s.labels, s.t_ns[i:], s.v[i:], s.clean) if i else s


def _after(results: list[dict[str, object]], t_ms: int) -> list[dict[str, object]]:
    """Drop samples at or before ``t_ms`` (sorted ``values``: only the first few can be)."""
    edge = t_ms / 1000.0
    for r in results:
        values = r.get("values")
        if not isinstance(values, list) or not values:
            continue
        i = 0
        while i < len(values) and _stamp(values[i]) <= edge:
            i += 1
        if i:
            r["values"] = values[i:]
    return results


def _stamp(point: object) -> float:
    try:
        return float(point[0])  # type: ignore[index]
    except (TypeError, ValueError, IndexError, KeyError):  # {} or {"0": ...} where a pair belongs
        return math.inf  # malformed: left for the parser to count


def _api_error_text(body: str) -> str:
    try:
        doc = json.loads(body)
    except (ValueError, TypeError, RecursionError):
        return ""
    if isinstance(doc, dict) and doc.get("status") == "error":
        return f"{doc.get('errorType', 'error')}: {doc.get('error', '')}"[:300]
    return ""


def _data_of(resp: httpx.Response, url: str) -> object:
    try:
        doc = resp.json()
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError both are
        raise EndpointError(url, f"malformed JSON response ({e}; first bytes "
                                 f"{resp.content[:40]!r})") from None
    if not isinstance(doc, dict) or doc.get("status") != "success" or "data" not in doc:
        raise EndpointError(url, f"unexpected response shape: {str(doc)[:120]}")
    return doc["data"]


def _result_list(data: object, where: str) -> list[dict[str, object]]:
    """The series of an answer. A ``scalar`` or ``string`` answer (``result`` is then one
    ``[time, value]`` pair, a list too) is not series: an error naming it, so the read is
    counted as failed, never read as "no samples"."""
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise EndpointError(where, "response has no data.result list")
    kind = data.get("resultType")
    if kind is not None and kind not in ("matrix", "vector"):
        raise EndpointError(where, f"answered a {str(kind)[:20]!r} result where series "
                                   "(matrix or vector) were asked for")
    return [r for r in data["result"] if isinstance(r, dict)]


def _sec(ns: int) -> str:
    return f"{ns / 1e9:.3f}"
