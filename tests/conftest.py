"""Fixtures for the whole suite."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def playwright_session():
    """The test session's one Playwright (sync API). It runs an event loop for as long as it lives, and a second
    `sync_playwright()` refuses to start beside it: every test that drives Chromium takes this one."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright
