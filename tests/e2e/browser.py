"""Headless Chromium driven over the Chrome DevTools Protocol (websocket-client), for report tests.

Chromium comes from Debian's ``chromium`` package. When it is missing and the tests
run as root, ``chromium_binary`` installs it with apt-get (waiting a bounded time for
the dpkg lock another job may hold); otherwise the test fails saying how to install it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

INSTALL_HINT = "install Debian's Chromium as root: `apt-get update && apt-get install -y chromium`"
APT_LOCK_WAIT_SECONDS = 600


def chromium_binary() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0:
        pytest.fail(f"headless Chromium is missing and the tests do not run as root: {INSTALL_HINT}")
    apt = ["apt-get", "-o", f"DPkg::Lock::Timeout={APT_LOCK_WAIT_SECONDS}", "-y", "-q"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = subprocess.run([*apt, "install", "--no-install-recommends", "chromium"], env=env,
                             capture_output=True, text=True)
    if install.returncode != 0:  # a stale package list: refresh once and retry
        subprocess.run([*apt, "update"], env=env, capture_output=True, text=True)
        install = subprocess.run([*apt, "install", "--no-install-recommends", "chromium"], env=env,
                                 capture_output=True, text=True)
    found = shutil.which("chromium")
    if not found:
        pytest.fail(f"apt-get could not install chromium ({install.stderr[-2000:]}); {INSTALL_HINT}")
    return found


class Browser:
    """One headless Chromium page; ``errors`` collects console errors and uncaught exceptions."""

    def __init__(self, profile_dir: Path, width: int = 1400, height: int = 900, timeout: float = 60.0):
        import websocket  # websocket-client, pinned in requirements.lock

        self.timeout = timeout
        self.process = subprocess.Popen(
            [chromium_binary(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", "--remote-debugging-port=0", "--remote-allow-origins=*",
             # data: iframes of the Snakemake report stay in this process, so their console is seen too
             "--disable-site-isolation-trials", "--disable-features=IsolateOrigins,site-per-process",
             f"--user-data-dir={profile_dir}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = self._devtools_port()
        deadline = time.monotonic() + timeout
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
                pages = [t for t in json.load(response) if t["type"] == "page"]
            if pages or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.socket = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=timeout)
        self.next_id = 0
        self.events: list[dict] = []
        self.errors: list[str] = []
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def _devtools_port(self) -> int:
        deadline = time.monotonic() + self.timeout
        lines = []
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line and self.process.poll() is not None:
                break
            lines.append(line)
            found = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if found:
                return int(found.group(1))
        self.process.kill()
        pytest.fail("Chromium did not start its DevTools endpoint:\n" + "".join(lines)[-3000:])

    def _record(self, message: dict) -> None:
        self.events.append(message)
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(f"uncaught exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            self.errors.append(f"console.{params['type']}: {text}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            self.errors.append(f"log error ({entry['source']}): {entry['text']} {entry.get('url', '')}")

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            reply = json.loads(self.socket.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._record(reply)

    def evaluate(self, expression: str, context_id: int | None = None):
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        if context_id is not None:
            params["contextId"] = context_id
        result = self.send("Runtime.evaluate", params)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, what: str, context_id: int | None = None):
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression, context_id)
            if value:
                return value
            time.sleep(0.25)
        raise AssertionError(f"timed out after {self.timeout:.0f} s waiting for {what}")

    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})
        self.wait_for("document.readyState === 'complete'", f"{url} to load")

    def frame_contexts(self) -> dict[str, int]:
        """Frame id → its main-world execution context id (iframes included)."""
        contexts = {}
        for event in self.events:
            if event.get("method") == "Runtime.executionContextCreated":
                context = event["params"]["context"]
                aux = context.get("auxData", {})
                if aux.get("isDefault"):
                    contexts[aux["frameId"]] = context["id"]
        return contexts

    def screenshot(self, path: Path, full_height: bool = False) -> Path:
        params = {"format": "png"}
        if full_height:
            height = self.evaluate("document.documentElement.scrollHeight")
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": 1400,
                                                            "height": min(height, 6000), "scale": 1})
        data = self.send("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.socket.close()
        finally:
            self.process.kill()
            self.process.wait(timeout=30)
