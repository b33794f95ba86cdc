"""Headless Chromium for the dashboard's browser test, driven by Selenium.

Debian's ``chromium`` and ``chromium-driver`` (``scripts/stack browser``,
which ``make test`` runs): Selenium is given both paths, so it never looks
for or downloads a browser. Selenium's calls block: call them from a thread
(``asyncio.to_thread``) so the run's recorders keep running meanwhile.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

CHROMIUM = os.environ.get("KUOTA_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("KUOTA_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1700",
)


@contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    for path in (CHROMIUM, CHROMEDRIVER):
        assert Path(path).is_file(), f"{path} missing: run `scripts/stack browser` (make test does)"
    with tempfile.TemporaryDirectory(prefix="kuota-chromium-") as profile:
        options = Options()
        options.binary_location = CHROMIUM
        for flag in FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--user-data-dir={profile}")
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        try:
            yield driver
        finally:
            driver.quit()
