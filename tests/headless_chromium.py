"""Headless Chromium driven over the DevTools protocol, for tests that look at a web page.

``chromium --dump-dom`` is not enough for a single-page app that keeps polling its server (the
Temporal Web UI): with ``--virtual-time-budget`` it never finishes, with ``--timeout`` it dumps
the page before the app rendered. So :class:`HeadlessChromium` starts Chromium with
``--remote-debugging-pipe`` (the protocol as NUL-terminated JSON on file descriptors 3 and 4:
no websocket library needed), opens a page and reads its text until the expected strings
appear. Text inside iframes counts (the UI renders Markdown in sandboxed frames), read from the
DOM with ``pierce``. Every read has a deadline, so a hung browser fails the test instead of
hanging it. Blocking calls: run them in a thread when an event loop must keep serving.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
    "--window-size=1400,1000",
)


def chromium_missing() -> str | None:
    """Why the browser tests cannot run here, or ``None``."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is not installed (apt-get install chromium; CI installs it)"
    return None


def compact(text: str) -> str:
    return "".join(text.split())


def _protocol_fds(commands: int, replies: int) -> None:
    """In the child: Chromium reads commands on fd 3 and writes replies on fd 4. Both ends move
    above 10 first, so neither is overwritten when the pipe itself got fd 3 or 4."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (commands, replies)]
    os.dup2(high[0], 3)
    os.dup2(high[1], 4)


class HeadlessChromium:
    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="streamctl-chromium-")
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()
        self.process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            pass_fds=(3, 4),
            preexec_fn=lambda: _protocol_fds(commands_read, replies_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next_id = 0
        self.session = ""

    def __enter__(self) -> HeadlessChromium:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _error: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        os.close(self._commands)
        os.close(self._replies)
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one protocol command (to the open page, once there is one) and wait for its
        reply; events in between are skipped."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session:
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                    raise TimeoutError(f"chromium did not answer {method} in {self.timeout}s")
                chunk = os.read(self._replies, 1 << 16)
                if not chunk:
                    raise EOFError(f"chromium exited (code {self.process.poll()})")
                self._buffer += chunk
            raw, _, self._buffer = self._buffer.partition(b"\0")
            reply = json.loads(raw)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply["result"]
                return result

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]

    def text(self) -> str:
        """The page's text, iframes included, one text node a line."""
        root = self.call("DOM.getDocument", {"depth": -1, "pierce": True})["root"]
        parts: list[str] = []
        stack = [root]
        while stack:
            node = stack.pop()
            if node.get("nodeType") == 3 and node.get("nodeValue", "").strip():
                parts.append(node["nodeValue"].strip())
            children = list(node.get("children", []))
            children += node.get("shadowRoots", [])
            if "contentDocument" in node:
                children.append(node["contentDocument"])
            stack.extend(reversed(children))
        return "\n".join(parts)

    def wait_for_text(self, expected: list[str], timeout: float = 45.0) -> str:
        """The page's text without whitespace (an editor that renders JSON makes every token a
        node) once it holds every expected string (compared without whitespace too); the last
        text read if the deadline passes first (the caller's assertion then shows it)."""
        wanted = [compact(part) for part in expected]
        deadline = time.monotonic() + timeout
        while True:
            text = compact(self.text())
            if all(part in text for part in wanted) or time.monotonic() > deadline:
                return text
            time.sleep(0.5)

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
