"""The built book as a reader sees it: headless Chromium renders two pages to PNG.

For the preface and the Week 1 chapter the browser must show the page title, a code
cell's output and a plot that actually loaded, log no console errors or uncaught
exceptions, and request nothing from outside the site. The browser is driven through
the Chrome DevTools protocol (the websocket-client package, installed with Jupyter),
so what is checked is the page after its scripts ran. Screenshots are kept in
_build/browser/ for a person to look at.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from book_support import HTML, ROOT, build_book

pytestmark = pytest.mark.slow

# Debian's chromium (.ci/run installs it); Chrome where that is what the machine has
# (GitHub's Ubuntu images).
CHROMIUM = next((p for p in (shutil.which(name) for name in
                             ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"))
                 if p), None)
SHOTS = ROOT / "_build" / "browser"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--hide-scrollbars", "--mute-audio",
]
PAGES = {
    "index": ("book/index.html", "Measure First"),
    "week1": ("book/week1_workload.html", "Week 1: The workload decides, not the chip"),
}


class DevTools:
    """The few DevTools-protocol calls these tests need, over one websocket."""

    def __init__(self, ws_url: str):
        import websocket  # websocket-client; imported here so a missing package skips

        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict] = []

    def call(self, method: str, **params):
        msg_id = next(self.ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_for(self, method: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while time.monotonic() < deadline:
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            msg = json.loads(self.ws.recv())
            self.events.append(msg)
            if msg.get("method") == method:
                return msg
        raise TimeoutError(method)

    def drain(self, seconds: float) -> None:
        """Collect events for a while (late scripts, lazy images)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.ws.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                self.events.append(json.loads(self.ws.recv()))
            except Exception:  # a receive timeout: nothing more happened
                break

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)
        return result["result"].get("value")

    def close(self) -> None:
        self.ws.close()


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium; .ci/run does it)")
    pytest.importorskip("websocket", reason="websocket-client is needed to drive Chromium")
    result = build_book()
    assert result.returncode == 0, "the book did not build; see test_book.py"
    with chromium() as tools:
        yield tools


@contextlib.contextmanager
def chromium():
    """A headless Chromium with a fresh profile, driven over the DevTools protocol."""
    profile = Path(tempfile.mkdtemp(prefix="measure-first-chromium-"))
    proc = subprocess.Popen(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
         "--remote-allow-origins=*", "--window-size=1280,900", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromium did not start: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            targets = json.load(r)
        page = next(t for t in targets if t["type"] == "page")
        tools = DevTools(page["webSocketDebuggerUrl"])
        yield tools
        tools.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


def render(tools: DevTools, relpath: str, name: str) -> dict:
    """Load one page, let its scripts run, and report what a reader would see."""
    tools.events.clear()
    for domain in ("Page", "Runtime", "Log", "Network"):
        tools.call(f"{domain}.enable")
    tools.call("Emulation.setDeviceMetricsOverride", width=1280, height=900,
               deviceScaleFactor=1, mobile=False)
    url = (HTML / relpath).as_uri()
    tools.call("Page.navigate", url=url)
    tools.wait_for("Page.loadEventFired", timeout=60)
    tools.drain(1.5)
    state = tools.evaluate("""(() => {
        const outputs = [...document.querySelectorAll('div.cell_output')];
        const text = outputs.map(o => o.innerText.trim()).filter(t => t.length > 0);
        const plots = outputs.flatMap(o => [...o.querySelectorAll('img')]);
        return {
          title: document.title,
          h1: (document.querySelector('main h1, article h1') || {}).innerText || '',
          outputs: text.length,
          firstOutput: text.length ? text[0].slice(0, 200) : '',
          plots: plots.length,
          plotsLoaded: plots.filter(i => i.complete && i.naturalWidth > 50).length,
          launch: [...document.querySelectorAll('.dropdown-launch-buttons a')].map(a => a.innerText.trim()),
        };
    })()""")
    shots = {}
    top = tools.call("Page.captureScreenshot", format="png")
    shots["top"] = SHOTS / f"{name}-top.png"
    tools.evaluate("""(() => { const img = document.querySelector('div.cell_output img');
                               if (img) img.scrollIntoView({block: 'center'}); })()""")
    tools.drain(0.5)
    plot = tools.call("Page.captureScreenshot", format="png")
    shots["plot"] = SHOTS / f"{name}-plot.png"
    SHOTS.mkdir(parents=True, exist_ok=True)
    shots["top"].write_bytes(base64.b64decode(top["data"]))
    shots["plot"].write_bytes(base64.b64decode(plot["data"]))

    console_errors = []
    requests = []
    for event in tools.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            console_errors.append("Uncaught " + details.get("exception", {}).get("description", details.get("text", "")))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            console_errors.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            console_errors.append(params["entry"].get("text", "") + " " + params["entry"].get("url", ""))
        elif method == "Network.requestWillBeSent":
            requests.append(params["request"]["url"])
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            console_errors.append(f"failed to load a resource: {params.get('errorText')}")
    return {**state, "console_errors": console_errors, "requests": requests, "shots": shots, "url": url}


def _pixel_variety(path: Path) -> tuple[int, float]:
    """Distinct colours and the standard deviation of brightness of a screenshot."""
    import matplotlib.image as mpimg
    import numpy as np

    pixels = mpimg.imread(path)[..., :3]
    colours = len(np.unique((pixels * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    return colours, float(pixels.mean(axis=2).std())


@pytest.fixture(scope="module")
def pages(browser):
    return {name: render(browser, relpath, name) for name, (relpath, _) in PAGES.items()}


@pytest.mark.parametrize("name", PAGES)
def test_page_shows_its_title(pages, name):
    title = PAGES[name][1]
    assert title in pages[name]["title"], pages[name]["title"]
    assert title in pages[name]["h1"], pages[name]["h1"]


@pytest.mark.parametrize("name", PAGES)
def test_page_shows_executed_output_and_a_loaded_plot(pages, name):
    page = pages[name]
    assert page["outputs"] >= 1, f"{name}: no visible code-cell output"
    assert page["firstOutput"], f"{name}: the first output is empty"
    assert page["plots"] >= 1 and page["plotsLoaded"] == page["plots"], (
        f"{name}: {page['plotsLoaded']} of {page['plots']} plots loaded"
    )


@pytest.mark.parametrize("name", PAGES)
def test_page_offers_the_launch_buttons(pages, name):
    assert {"Codespaces", "Binder", "Colab"} <= set(pages[name]["launch"]), pages[name]["launch"]


@pytest.mark.parametrize("name", PAGES)
def test_browser_console_has_no_errors(pages, name):
    assert pages[name]["console_errors"] == []


@pytest.mark.parametrize("name", PAGES)
def test_page_requests_nothing_from_outside_the_site(pages, name):
    outside = [u for u in pages[name]["requests"]
               if not u.startswith(("file://", "data:", "about:", "blob:", "chrome"))]
    assert outside == [], f"{name} asked the network for {outside}"
    assert any(u.startswith("file://") for u in pages[name]["requests"]), "no requests were seen"


@pytest.mark.parametrize("name", PAGES)
@pytest.mark.parametrize("shot", ["top", "plot"])
def test_screenshots_are_not_blank(pages, name, shot):
    colours, spread = _pixel_variety(pages[name]["shots"][shot])
    assert colours > 50 and spread > 0.05, f"{name} {shot}: {colours} colours, brightness sd {spread:.3f}"
