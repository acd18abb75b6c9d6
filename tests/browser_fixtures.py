"""One headless Chromium for the whole test session (loaded with ``pytest_plugins``)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from browser_helpers import ARGS, CHROMIUM


@pytest.fixture(scope="session")
def browser() -> Iterator:
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make browser` (Debian's chromium package)")
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()
