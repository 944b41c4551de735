"""Prometheus remote-read protobuf messages (``prompb``), built at import time.

The same approach as :mod:`stormotel.analyzers.sinks.prompb` for remote write: the messages of
Prometheus' ``prompb/remote.proto`` and ``prompb/types.proto`` that a streamed remote read uses
(``ReadRequest``, ``Query``, ``LabelMatcher``, ``ReadHints``, ``ChunkedReadResponse``,
``ChunkedSeries``, ``Chunk``, ``Label``) are declared as descriptors with the field numbers and
names of those files, and the official protobuf runtime generates the classes: encoding and
decoding are the protobuf library's, never hand-written.
"""

from __future__ import annotations

from stormotel.analyzers.protodesc import F as _F
from stormotel.analyzers.protodesc import message_classes

#: ``ReadRequest.ResponseType``: raw samples, or streamed XOR chunks (Prometheus >= 2.13).
SAMPLES = 0
STREAMED_XOR_CHUNKS = 1
#: ``LabelMatcher.Type``.
EQ, NEQ, RE, NRE = 0, 1, 2, 3
#: ``Chunk.Encoding``: only XOR (float samples) is decoded; histogram chunks are counted.
CHUNK_XOR = 1


_opt, _rep = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_i64, _s, _b, _m = _F.TYPE_INT64, _F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_MESSAGE
_CLASSES = message_classes("stormotel/prompb_read.proto", "prometheus_read", {
    "Label": [("name", 1, _s, _opt, ""), ("value", 2, _s, _opt, "")],
    # Enums are read as plain ints (type int32 keeps the descriptor small; same wire type).
    "LabelMatcher": [("type", 1, _F.TYPE_INT32, _opt, ""), ("name", 2, _s, _opt, ""),
                     ("value", 3, _s, _opt, "")],
    "ReadHints": [("step_ms", 1, _i64, _opt, ""), ("func", 2, _s, _opt, ""),
                  ("start_ms", 3, _i64, _opt, ""), ("end_ms", 4, _i64, _opt, ""),
                  ("grouping", 5, _s, _rep, ""), ("by", 6, _F.TYPE_BOOL, _opt, ""),
                  ("range_ms", 7, _i64, _opt, "")],
    "Query": [("start_timestamp_ms", 1, _i64, _opt, ""), ("end_timestamp_ms", 2, _i64, _opt, ""),
              ("matchers", 3, _m, _rep, ".prometheus_read.LabelMatcher"),
              ("hints", 4, _m, _opt, ".prometheus_read.ReadHints")],
    "ReadRequest": [("queries", 1, _m, _rep, ".prometheus_read.Query"),
                    ("accepted_response_types", 2, _F.TYPE_INT32, _rep, "")],
    "Chunk": [("min_time_ms", 1, _i64, _opt, ""), ("max_time_ms", 2, _i64, _opt, ""),
              ("type", 3, _F.TYPE_INT32, _opt, ""), ("data", 4, _b, _opt, "")],
    "ChunkedSeries": [("labels", 1, _m, _rep, ".prometheus_read.Label"),
                      ("chunks", 2, _m, _rep, ".prometheus_read.Chunk")],
    "ChunkedReadResponse": [("chunked_series", 1, _m, _rep, ".prometheus_read.ChunkedSeries"),
                            ("query_index", 2, _i64, _opt, "")],
})


LabelMatcher = _CLASSES["LabelMatcher"]
Query = _CLASSES["Query"]
ReadRequest = _CLASSES["ReadRequest"]
ChunkedReadResponse = _CLASSES["ChunkedReadResponse"]
