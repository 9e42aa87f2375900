"""HTTP with the standard library: JSON requests with a bearer token, and a server-sent event
stream read line by line. The API's error body (`detail`, `errors`) becomes a typed error."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http.client import HTTPException, HTTPResponse
from typing import Any

from framefleet_client.errors import RateLimited, Unreachable, error_for

USER_AGENT = "framefleet-client/0.1"


@dataclass(frozen=True)
class Event:
    """One server-sent event: its kind (`job`, `launch`, `interruption`, `ended`), its id
    (job moves only: pass it as `after` to resume) and its data."""

    kind: str
    id: str | None
    data: dict[str, Any]


KEEPALIVE = Event("keepalive", None, {})


class Transport:
    def __init__(self, url: str, token: str, timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.base = url.rstrip("/")
        self._token = token
        self.timeout = timeout
        # Redirects are not followed: a token is never sent on to another place.
        self._opener = urllib.request.build_opener(_NoRedirect)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: Mapping[str, str | int | None] | None = None,
    ) -> Any:
        """The answer's JSON (None for an empty body); an ApiError for an error status."""
        with self._open(method, path, body, query, self.timeout) as answer:
            text = answer.read().decode()
        return json.loads(text) if text else None

    def events(self, after: int | None = None, timeout: float | None = None) -> EventStream:
        """The event stream from after `after` (None: from now), open when this returns;
        `timeout` bounds each read (the API sends a keep-alive every 15 s)."""
        query = {"after": after} if after is not None else None
        return EventStream(self._open("GET", "/v1/events", None, query, timeout or self.timeout))

    def _open(
        self,
        method: str,
        path: str,
        body: Any,
        query: Mapping[str, str | int | None] | None,
        timeout: float,
    ) -> HTTPResponse:
        url = self.base + path
        given = {k: str(v) for k, v in (query or {}).items() if v is not None}
        if given:
            url += "?" + urllib.parse.urlencode(given)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self._token}", "User-Agent": USER_AGENT}
        if data is not None:
            headers["Content-Type"] = "application/json"
        # The URL is ours (checked http(s) in __init__) plus a quoted path.
        request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
        try:
            answer = self._opener.open(request, timeout=timeout)
        except urllib.error.HTTPError as error:
            raise _api_error(error) from None
        except (urllib.error.URLError, HTTPException, OSError) as error:
            raise Unreachable(f"{self.base}: {getattr(error, 'reason', error)}") from None
        assert isinstance(answer, HTTPResponse)
        return answer


class EventStream:
    """An open event stream: iterate it for its events; close it (or use `with`) when done."""

    def __init__(self, answer: HTTPResponse) -> None:
        self._answer = answer

    def __iter__(self) -> Iterator[Event]:
        return _parse_events(self._answer)

    def close(self) -> None:
        self._answer.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _api_error(error: urllib.error.HTTPError) -> Exception:
    try:
        body = json.loads(error.read().decode() or "{}")
    except (ValueError, OSError):
        body = {}
    detail = body.get("detail") if isinstance(body, dict) else None
    errors = body.get("errors") if isinstance(body, dict) else None
    found = error_for(
        error.code,
        detail if isinstance(detail, str) else str(error.reason),
        tuple(str(e) for e in errors) if isinstance(errors, list) else (),
    )
    if isinstance(found, RateLimited):
        retry_after = error.headers.get("Retry-After", "")
        found.retry_after = float(retry_after) if retry_after.isdigit() else None
    return found


def _parse_events(answer: HTTPResponse) -> Iterator[Event]:
    kind, event_id, data = "message", None, list[str]()
    try:
        for raw in answer:
            line = raw.decode().rstrip("\r\n")
            if not line:
                if data:
                    yield Event(kind, event_id, _json_object("\n".join(data)))
                kind, event_id, data = "message", None, list[str]()
            elif line.startswith(":"):
                yield KEEPALIVE  # a reader's chance to look at its clock
            else:
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if field == "event":
                    kind = value
                elif field == "id":
                    event_id = value
                elif field == "data":
                    data.append(value)
    except (OSError, HTTPException) as error:
        raise Unreachable(f"the event stream broke: {error}") from None


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"text": text}
    return value if isinstance(value, dict) else {"value": value}
