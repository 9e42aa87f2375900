"""Guessing tokens and forging logins: failed authentication is throttled per source address,
and the console's login takes only its own form (a CSRF token in the form and in a cookie
only this site sends, and no foreign Origin)."""

from __future__ import annotations

import re

import urllib3

from tests.support.served_api import FAILED_AUTH_PER_MINUTE, ServedApi, from_address


def test_an_address_that_keeps_guessing_tokens_is_held_off(api: ServedApi) -> None:
    guesser = from_address(api, "127.0.0.3")
    wrong = {"Authorization": "Bearer ff_guess_nothere"}
    statuses = [
        guesser.call("GET", "/v1/jobs", None, headers=wrong).status
        for _ in range(FAILED_AUTH_PER_MINUTE)
    ]
    assert statuses == [401] * FAILED_AUTH_PER_MINUTE
    held = guesser.call("GET", "/v1/jobs", "reader")  # even a good token, from there
    assert held.status == 429
    assert int(held.headers["retry-after"]) >= 1
    assert api.call("GET", "/v1/jobs", "reader").status == 200  # other addresses are not held


def login_form(http: urllib3.PoolManager, base: str) -> tuple[str, str]:
    """The login page's CSRF field and the cookie it set."""
    page = http.request("GET", base + "/console/login", redirect=False)
    found = re.search(r'name="csrf" value="([^"]+)"', page.data.decode())
    assert found is not None
    cookie = page.headers["set-cookie"].split(";")[0]
    return found.group(1), cookie


def post_login(
    http: urllib3.PoolManager, base: str, fields: str, headers: dict[str, str]
) -> urllib3.BaseHTTPResponse:
    return http.request(
        "POST",
        base + "/console/login",
        body=fields.encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
        redirect=False,
    )


def test_the_console_login_takes_only_its_own_form(api: ServedApi) -> None:
    http = urllib3.PoolManager(retries=False, source_address=("127.0.0.4", 0))
    token = api.tokens["reader"]
    csrf, cookie = login_form(http, api.base)
    # A form posted from another site: no CSRF cookie comes with it (SameSite=Strict).
    assert post_login(http, api.base, f"token={token}&csrf={csrf}", {}).status == 403
    # The right cookie and field, but another site's Origin.
    foreign = {"Cookie": cookie, "Origin": "https://evil.example"}
    assert post_login(http, api.base, f"token={token}&csrf={csrf}", foreign).status == 403
    # A field that does not match the cookie.
    mismatched = post_login(http, api.base, f"token={token}&csrf=guess", {"Cookie": cookie})
    assert mismatched.status == 403
    own = post_login(http, api.base, f"token={token}&csrf={csrf}", {"Cookie": cookie})
    assert own.status == 303
    assert "framefleet_token=" in own.headers["set-cookie"]


def post_logout(api: ServedApi, fields: str, headers: dict[str, str]) -> urllib3.BaseHTTPResponse:
    return api.http.request(
        "POST",
        api.base + "/console/logout",
        body=fields.encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded", **headers},
        redirect=False,
    )


def test_only_the_consoles_own_form_logs_out(api: ServedApi) -> None:
    session = {"Cookie": f"framefleet_token={api.tokens['reader']}"}
    page = api.http.request("GET", api.base + "/console", headers=session, redirect=False)
    found = re.search(
        r'action="/console/logout"><input type="hidden" name="csrf" value="(\w+)"',
        page.data.decode(),
    )
    assert found is not None
    csrf = found.group(1)
    # A page elsewhere posting the form (its browser would send the cookie only if the
    # site were the same: SameSite=Strict; here it does, to show the field is checked).
    assert post_logout(api, "", session).status == 403
    assert post_logout(api, "csrf=guess", session).status == 403
    foreign = {**session, "Origin": "https://evil.example"}
    assert post_logout(api, f"csrf={csrf}", foreign).status == 403
    own = post_logout(api, f"csrf={csrf}", session)
    assert own.status == 303
    assert 'framefleet_token=""' in own.headers["set-cookie"]
