"""Protobuf message classes from a table of fields, for the wire formats with no official Python
package (Prometheus' ``prompb`` for remote write and remote read).

Declaring the messages as descriptors with the upstream field numbers and names, and letting
the official protobuf runtime generate the classes, keeps encoding and decoding the library's
(byte for byte what Prometheus' Go structs expect) without committing generated code. Each
caller gets its own descriptor pool, so the write and read declarations never collide.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

__all__ = ["F", "Field", "message_classes"]

F = descriptor_pb2.FieldDescriptorProto
#: (name, number, type, label, message type name or "") — one field of a message.
Field = tuple[str, int, int, int, str]


def message_classes(file_name: str, package: str,
                    messages: Mapping[str, Sequence[Field]]) -> dict[str, type]:
    """The generated class of each message in ``messages`` (declared in that order, in one
    proto3 file ``file_name`` of ``package``)."""
    fd = descriptor_pb2.FileDescriptorProto(name=file_name, package=package, syntax="proto3")
    for name, fields in messages.items():
        m = fd.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                f.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{package}.{name}"))
            for name in messages}
