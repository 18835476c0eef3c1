"""`compare`'s report.html in a real headless Chromium (Debian's; `.ci/run` installs it when missing).

The page is opened from file:// with the network off; the test reads the DOM Chromium dumps after
the page's `load` event: the report's own check (`body[data-report-check]`: every image decoded,
tables present) must say `ok`, and Chromium's log must show no console message. A broken page is
opened the same way first, so a check that cannot fail would be caught.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from streaming.compare import plan, run_compare
from tests.streaming.compare_scenario import write_scenario

CHROMIUM = "chromium"
REQUESTS = 600


def _open(page: Path, profile: Path) -> tuple[str, str]:
    """(the DOM after load, Chromium's log) of `page` opened in headless Chromium."""
    binary = shutil.which(CHROMIUM)
    assert binary, "chromium is not installed: apt-get install -y --no-install-recommends chromium (.ci/run does)"
    run = subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--no-first-run",
                          f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
                          "--dump-dom", page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout, run.stderr


def _check(dom: str) -> str:
    found = re.search(r'<body[^>]*data-report-check="([^"]*)"', dom)
    assert found, "the page's check did not run"
    return found.group(1)


def _console(log: str) -> list[str]:
    return [line for line in log.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def report(spark, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    events, off, on = write_scenario(folder, REQUESTS)
    run_compare(spark, plan([str(off), str(on)]), [events], folder / "out", complete_search=False)
    return folder / "out" / "report.html"


def test_a_broken_page_is_caught(report, tmp_path):
    page = report.read_text(encoding="utf-8")
    broken = tmp_path / "broken.html"
    broken.write_text(page.replace('src="data:image/png;base64,', 'src="data:image/png;base64,AAAA', 1)
                      .replace("<body>", "<body><script>console.error('broken on purpose')</script>", 1),
                      encoding="utf-8")
    dom, log = _open(broken, tmp_path / "profile")
    assert _check(dom).startswith("broken: placement debt")
    assert any("broken on purpose" in line for line in _console(log))


def test_the_report_renders_with_its_images_and_tables_and_no_console_message(report, tmp_path):
    dom, log = _open(report, tmp_path / "profile")
    assert _check(dom) == "ok 3 images 3 tables"
    assert _console(log) == []
    assert "enforcement-off" in dom and "enforcement-on" in dom
    assert "Requests whose outcome differs" in dom and "<details>" in dom
    assert not re.search(r'(src|href)="(https?:)?//', dom), "the report must not load anything from a server"
