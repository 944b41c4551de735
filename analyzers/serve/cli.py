"""``stormotel serve``: the receiver's life — start, serve, stop on SIGTERM.

Start-up reads the queue folder back (work a killed process had queued runs now) and the
published reports' ``meta.json`` (so a retry of a delivery already analysed stays a duplicate
across a restart), then listens. SIGTERM or SIGINT: stop accepting, let the analyses in flight
finish within ``--grace`` (an unfinished one stays queued on disk), exit 0.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from types import FrameType

from stormotel.analyzers.serve.options import ServeOptions, build_parser, options_from_args

from stormotel import exitcodes
from stormotel.errors import StormotelError, UsageError
from stormotel.textsafe import one_line


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        opts = options_from_args(args)
    except StormotelError as e:
        parser.error(one_line(e))
    return serve(opts)


def serve(opts: ServeOptions, *, stop: threading.Event | None = None) -> int:
    """Run until SIGTERM/SIGINT (or ``stop`` is set); the exit code."""
    from stormotel.analyzers.serve.auth import load_auth
    from stormotel.analyzers.serve.http import App, Server, tls_context
    from stormotel.analyzers.serve.metrics import ServeMetrics
    from stormotel.analyzers.serve.queue import WorkQueue
    from stormotel.analyzers.serve.store import Store
    from stormotel.analyzers.serve.worker import Analyst, Workers

    auth = load_auth(opts.token_file, opts.user, opts.password_file)
    try:
        opts.out.mkdir(parents=True, exist_ok=True)
        store = Store(opts.out)
        queue = WorkQueue(opts.out, max_jobs=opts.max_queue, min_interval_s=opts.min_interval_s)
    except OSError as e:
        raise UsageError(f"cannot use --out {str(opts.out)!r}: {one_line(e)}") from None
    for meta in store.recent(limit=100_000):
        if isinstance(meta.get("analysed_at_ns"), int):
            queue.remember_run(str(meta.get("job_id")), meta["analysed_at_ns"],
                               [str(k) for k in meta.get("keys") or []])
    metrics = ServeMetrics(lambda: float(queue.depth()))
    analyst = Analyst(opts.base, store, metrics, opts.max_window_s, sys.stderr)
    workers = Workers(queue, analyst, opts.workers)
    ready = threading.Event()
    app = App(queue, store, metrics, auth, opts.max_body, opts.protect_reports,
              opts.public_url, ready)
    tls = tls_context(opts.tls_cert, opts.tls_key) if opts.tls_cert and opts.tls_key else None
    try:
        server = Server((opts.host, opts.port), app, opts.max_connections, tls)
    except OSError as e:
        raise UsageError(f"cannot listen on {opts.host}:{opts.port}: {one_line(e)}") from None
    stop = stop or threading.Event()
    _on_signals(stop)
    workers.start()
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                               name="stormotel-serve-http", daemon=True)
    serving.start()
    ready.set()
    scheme = "https" if tls else "http"
    analyst.say(f"listening on {scheme}://{opts.host}:{server.server_address[1]} "
                f"(queued from before: {queue.depth()}"
                + (f", unreadable queue files set aside: {queue.unreadable}"
                   if queue.unreadable else "") + ")")
    next_sweep = 0.0
    while not stop.wait(1.0):
        if time.monotonic() >= next_sweep:
            removed = store.sweep(opts.retention_s)
            if removed:
                analyst.say(f"retention: removed {removed} report(s) older than "
                            f"{opts.retention_s:g} s")
            next_sweep = time.monotonic() + min(3600.0, max(10.0, opts.retention_s / 10))
    ready.clear()
    analyst.say("stopping: no new webhooks; waiting for analyses in flight")
    server.shutdown()
    server.server_close()
    finished = workers.stop(opts.grace_s)
    analyst.say("stopped" + ("" if finished else
                             " (an analysis still running stays queued for the next start)"))
    return exitcodes.OK


def _on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


__all__ = ["argparse", "main", "serve"]
