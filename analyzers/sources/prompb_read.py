"""Prometheus remote-read protobuf messages (``prompb``), built at import time.

The same approach as :mod:`stormotel.analyzers.sinks.prompb` for remote write: the messages of
Prometheus' ``prompb/remote.proto`` and ``prompb/types.proto`` that a streamed remote read uses
(``ReadRequest``, ``Query``, ``LabelMatcher``, ``ReadHints``, ``ChunkedReadResponse``,
``ChunkedSeries``, ``Chunk``, ``Label``) are declared as descriptors with the field numbers and
names of those files, and the official protobuf runtime generates the classes: encoding and
decoding are the protobuf library's, never hand-written.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto

#: ``ReadRequest.ResponseType``: raw samples, or streamed XOR chunks (Prometheus >= 2.13).
SAMPLES = 0
STREAMED_XOR_CHUNKS = 1
#: ``LabelMatcher.Type``.
EQ, NEQ, RE, NRE = 0, 1, 2, 3
#: ``Chunk.Encoding``: only XOR (float samples) is decoded; histogram chunks are counted.
CHUNK_XOR = 1


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="stormotel/prompb_read.proto",
                                            package="prometheus_read", syntax="proto3")

    def msg(name: str, fields: list[tuple[str, int, int, int, str]]) -> None:
        m = fd.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name

    opt, rep = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    i64, s, b = _F.TYPE_INT64, _F.TYPE_STRING, _F.TYPE_BYTES
    m = _F.TYPE_MESSAGE
    msg("Label", [("name", 1, s, opt, ""), ("value", 2, s, opt, "")])
    # Enums are read as plain ints (type int32 keeps the descriptor small; same wire type).
    msg("LabelMatcher", [("type", 1, _F.TYPE_INT32, opt, ""), ("name", 2, s, opt, ""),
                         ("value", 3, s, opt, "")])
    msg("ReadHints", [("step_ms", 1, i64, opt, ""), ("func", 2, s, opt, ""),
                      ("start_ms", 3, i64, opt, ""), ("end_ms", 4, i64, opt, ""),
                      ("grouping", 5, s, rep, ""), ("by", 6, _F.TYPE_BOOL, opt, ""),
                      ("range_ms", 7, i64, opt, "")])
    msg("Query", [("start_timestamp_ms", 1, i64, opt, ""), ("end_timestamp_ms", 2, i64, opt, ""),
                  ("matchers", 3, m, rep, ".prometheus_read.LabelMatcher"),
                  ("hints", 4, m, opt, ".prometheus_read.ReadHints")])
    msg("ReadRequest", [("queries", 1, m, rep, ".prometheus_read.Query"),
                        ("accepted_response_types", 2, _F.TYPE_INT32, rep, "")])
    msg("Chunk", [("min_time_ms", 1, i64, opt, ""), ("max_time_ms", 2, i64, opt, ""),
                  ("type", 3, _F.TYPE_INT32, opt, ""), ("data", 4, b, opt, "")])
    msg("ChunkedSeries", [("labels", 1, m, rep, ".prometheus_read.Label"),
                          ("chunks", 2, m, rep, ".prometheus_read.Chunk")])
    msg("ChunkedReadResponse", [("chunked_series", 1, m, rep, ".prometheus_read.ChunkedSeries"),
                                ("query_index", 2, i64, opt, "")])
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def _cls(name: str) -> type:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"prometheus_read.{name}"))


LabelMatcher = _cls("LabelMatcher")
Query = _cls("Query")
ReadRequest = _cls("ReadRequest")
ChunkedReadResponse = _cls("ChunkedReadResponse")
