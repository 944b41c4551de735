"""Open a page in real headless Chromium over the DevTools protocol (``--remote-debugging-pipe``).

Tests and the HTML-report benchmark use it to see what a person would: console errors, uncaught
exceptions, every network request the page makes, how long it takes to draw, and a full-page
screenshot. The pipe transport (NUL-terminated JSON on fds 3/4) needs no websocket library.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    for name in CHROMIUM_NAMES:
        if found := shutil.which(name):
            return found
    return None


@dataclass
class PageResult:
    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    rendered: bool = False
    report: dict[str, Any] = field(default_factory=dict)
    wall_load_s: float = 0.0
    screenshot_png: bytes = b""
    #: Page coordinates (x, y, width, height) of every <canvas>, to crop plots from the shot.
    canvases: list[list[float]] = field(default_factory=list)

    @property
    def network_requests(self) -> list[str]:
        """Requests for anything but the page file itself and inline data."""
        return [u for u in self.requests if not u.startswith(("file://", "data:"))]


class _Pipe:
    def __init__(self, proc: subprocess.Popen[bytes], write_fd: int, read_fd: int) -> None:
        self.proc, self.write_fd, self.read_fd = proc, write_fd, read_fd
        self.buf = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None, timeout: float = 30.0) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.write_fd, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self.read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from chromium")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)


def open_page(path: Path, *, width: int = 1400, timeout_s: float = 60.0) -> PageResult:
    """Load ``path`` from a file:// URL, wait until the page says it has drawn, screenshot it."""
    exe = chromium_path()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (scripts/bootstrap.sh servers)")
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    def wire() -> None:  # runs in the child: DevTools expects commands on 3, answers on 4
        os.dup2(to_child_r, 3)
        os.dup2(from_child_w, 4)

    # Chromium's helper processes may still write the profile while it is removed.
    with tempfile.TemporaryDirectory(prefix="stormotel-chromium-",
                                     ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={profile}", "--no-first-run", "--disable-extensions",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-default-apps", "--mute-audio", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire, pass_fds=(3, 4),  # fds 3/4 are wired in the child by ``wire``
            start_new_session=True)  # its own group: stopped whole, helpers included
        os.close(to_child_r)
        os.close(from_child_w)
        pipe = _Pipe(proc, to_child_w, from_child_r)
        try:
            return _drive(pipe, path, width, timeout_s)
        finally:
            os.close(to_child_w)
            os.close(from_child_r)
            _stop_group(proc)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM Chromium's whole process group, SIGKILL what is left after 10 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


_CANVAS_RECTS = ("JSON.stringify(Array.from(document.querySelectorAll('canvas')).map(function (c) {"
                 " var r = c.getBoundingClientRect();"
                 " return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height];"
                 " }))")


def _drive(pipe: _Pipe, path: Path, width: int, timeout_s: float) -> PageResult:
    target = pipe.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
        "sessionId"]
    for domain in ("Runtime", "Log", "Network", "Page"):
        pipe.send(f"{domain}.enable", session=session)
    pipe.send("Emulation.setDeviceMetricsOverride",
              {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
              session=session)
    out = PageResult()
    started = time.monotonic()
    pipe.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
    deadline = started + timeout_s
    while time.monotonic() < deadline:
        res = pipe.send("Runtime.evaluate", {
            "expression": "document.body && document.body.getAttribute('data-rendered')",
            "returnByValue": True}, session=session)
        if res.get("result", {}).get("value") == "1":
            out.rendered = True
            break
        time.sleep(0.02)
    out.wall_load_s = time.monotonic() - started
    if out.rendered:
        res = pipe.send("Runtime.evaluate", {"expression": "JSON.stringify(window.stormotelReport)",
                                             "returnByValue": True}, session=session)
        out.report = json.loads(res["result"]["value"])
    res = pipe.send("Runtime.evaluate", {"expression": _CANVAS_RECTS, "returnByValue": True},
                    session=session)
    out.canvases = json.loads(res["result"]["value"])
    metrics = pipe.send("Page.getLayoutMetrics", session=session)
    height = int(metrics.get("cssContentSize", metrics.get("contentSize", {})).get("height", 900))
    shot = pipe.send("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": width, "height": min(height, 8000), "scale": 1}},
        session=session)
    out.screenshot_png = base64.b64decode(shot["data"])
    _collect(pipe.events, out)
    return out


def _collect(events: list[dict[str, Any]], out: PageResult) -> None:
    for ev in events:
        method, p = ev.get("method"), ev.get("params", {})
        if method == "Network.requestWillBeSent":
            out.requests.append(p.get("request", {}).get("url", ""))
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.console_errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                               for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.exceptions.append(str(d.get("exception", {}).get("description", d.get("text"))))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.console_errors.append(str(p["entry"].get("text")))
