"""Prometheus remote-write protobuf messages (``prompb``), built at import time.

There is no official Python remote-write client. Rather than hand-encode the wire format or
commit generated code, the four messages of Prometheus' ``prompb/types.proto`` and
``prompb/remote.proto`` that remote write 1.0 uses (``WriteRequest``, ``TimeSeries``, ``Label``,
``Sample``) are declared here as descriptors with the same field numbers and names, and the
official protobuf runtime generates the classes — encoding is the protobuf library's, byte for
byte what Prometheus' Go structs expect.
"""

from __future__ import annotations

from stormotel.analyzers.protodesc import F, message_classes

_opt, _rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
_CLASSES = message_classes("stormotel/prompb_remote.proto", "prometheus", {
    "Sample": [("value", 1, F.TYPE_DOUBLE, _opt, ""), ("timestamp", 2, F.TYPE_INT64, _opt, "")],
    "Label": [("name", 1, F.TYPE_STRING, _opt, ""), ("value", 2, F.TYPE_STRING, _opt, "")],
    "TimeSeries": [("labels", 1, F.TYPE_MESSAGE, _rep, ".prometheus.Label"),
                   ("samples", 2, F.TYPE_MESSAGE, _rep, ".prometheus.Sample")],
    # Field 3 (metadata) is optional for receivers and not sent.
    "WriteRequest": [("timeseries", 1, F.TYPE_MESSAGE, _rep, ".prometheus.TimeSeries")],
})

Sample = _CLASSES["Sample"]
Label = _CLASSES["Label"]
TimeSeries = _CLASSES["TimeSeries"]
WriteRequest = _CLASSES["WriteRequest"]
