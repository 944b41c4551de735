"""Prometheus remote-write protobuf messages (``prompb``), built at import time.

There is no official Python remote-write client. Rather than hand-encode the wire format or
commit generated code, the four messages of Prometheus' ``prompb/types.proto`` and
``prompb/remote.proto`` that remote write 1.0 uses (``WriteRequest``, ``TimeSeries``, ``Label``,
``Sample``) are declared here as descriptors with the same field numbers and names, and the
official protobuf runtime generates the classes — encoding is the protobuf library's, byte for
byte what Prometheus' Go structs expect.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="stormotel/prompb_remote.proto",
                                            package="prometheus", syntax="proto3")

    def msg(name: str, fields: list[tuple[str, int, int, int, str]]) -> None:
        m = fd.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name

    opt, rep = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    msg("Sample", [("value", 1, _F.TYPE_DOUBLE, opt, ""),
                   ("timestamp", 2, _F.TYPE_INT64, opt, "")])
    msg("Label", [("name", 1, _F.TYPE_STRING, opt, ""), ("value", 2, _F.TYPE_STRING, opt, "")])
    msg("TimeSeries", [("labels", 1, _F.TYPE_MESSAGE, rep, ".prometheus.Label"),
                       ("samples", 2, _F.TYPE_MESSAGE, rep, ".prometheus.Sample")])
    # Field 3 (metadata) is optional for receivers and not sent.
    msg("WriteRequest", [("timeseries", 1, _F.TYPE_MESSAGE, rep, ".prometheus.TimeSeries")])
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())


def _cls(name: str) -> type:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"prometheus.{name}"))


Sample = _cls("Sample")
Label = _cls("Label")
TimeSeries = _cls("TimeSeries")
WriteRequest = _cls("WriteRequest")
