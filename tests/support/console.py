"""The console in Chromium (Playwright): logging in with a token."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect


def log_in(page: Page, base: str, token: str) -> None:
    page.goto(base + "/console")
    expect(page).to_have_url(re.compile(r"/console/login$"))  # no cookie: the login page
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Queue")).to_be_visible()
