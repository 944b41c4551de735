"""A ``stormotel track`` process started ahead of its time: the interpreter's start-up and the
tracker's imports are paid first, then it waits for its command line on stdin.

The production fleet starts 36 trackers at planned offsets a second or two apart. On a loaded
2-core host their interpreters' start-up alone (about 0.6 s of CPU each, 36 at once) took more
than 30 s, so the fixture's lead-in had to absorb start-up rather than the offsets it is about.
Here every tracker is started at once and reports ``ready`` on stdout once its imports are done;
the fixture then fixes the shared epoch and sends each one ``{"env": {...}, "argv": [...]}`` as
one JSON line at its planned offset. What runs next is the command as a user types it
(:func:`stormotel.cli.main` with ``track ...``, the same entry point ``python -m stormotel``
calls): the tracker's own start (the sampler, its warm-up origin, the endpoints) happens at the
planned offset, not when the interpreter happened to finish loading.

Run as ``python -m tests.production.tracker_gate``.
"""

from __future__ import annotations

import json
import os
import sys

#: The modules ``stormotel track --sampler simulated --archive ... --prometheus-port ...``
#: imports on its way to its first sample (stormotel.cli imports the command module only when
#: run; track_cli imports the tracker only where it builds one). Imported before ``ready``.
#: (A module missing here is only loaded after the go, at the cost of a later first sample.)
PRELOAD = ("stormotel.cli", "stormotel.track_cli", "stormotel.tracker", "stormotel.telemetry",
           "stormotel.exporters", "stormotel.archive_writer", "stormotel.archive_spans",
           "stormotel.scrape_watch", "stormotel.samplers.simulated", "prometheus_client.core",
           "opentelemetry.exporter.prometheus",
           "opentelemetry.exporter.otlp.json.file.metric_exporter",
           "opentelemetry.exporter.otlp.json.file.trace_exporter", "importlib.metadata",
           "xxhash", "zstandard")

READY = "ready"


def main() -> int:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    print(READY, flush=True)
    # Nothing else goes to the pipe the fixture read ``ready`` from (it no longer reads it).
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    line = sys.stdin.readline()
    if not line.strip():  # stdin closed before the command came: the fixture gave up
        print("tracker_gate: no command on stdin", file=sys.stderr)
        return 2
    order = json.loads(line)
    os.environ.update({str(k): str(v) for k, v in order["env"].items()})
    from stormotel import cli

    return cli.main(["track", *order["argv"]])


if __name__ == "__main__":
    sys.exit(main())
