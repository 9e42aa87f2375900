"""The API's application: routes, error bodies, security headers. The composition root builds
it with the services it needs and serves it with uvicorn inside `framefleet serve`."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kernel.outside_text import printable
from orchestrator.api import (
    console,
    console_pages,
    dead_letter_routes,
    events,
    fleet_routes,
    history_routes,
    instance_routes,
    job_change_routes,
    jobs_routes,
    notice_routes,
    operator_routes,
    token_routes,
)
from orchestrator.api.ports import ApiServices
from orchestrator.api.security import RateLimit

log = logging.getLogger(__name__)
VERSION = "1.0.0"
HERE = Path(__file__).parent
# The console's pages load only their own script and style sheet, and no other site may frame
# them.
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; "
        b"frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


class SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers if scope["type"] == "http" else send)


def _problem(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)
    body: dict[str, Any] = (
        error.detail if isinstance(error.detail, dict) else {"detail": str(error.detail)}
    )
    return JSONResponse(body, status_code=error.status_code, headers=error.headers)


def _invalid_request(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    lines = []
    for item in error.errors():
        where = ".".join(printable(str(part), 64) for part in item.get("loc", ()))
        lines.append(f"{where}: {item.get('msg', 'invalid')}")
    return JSONResponse({"detail": "invalid request", "errors": lines}, status_code=422)


def _to_login(request: Request, error: Exception) -> RedirectResponse:
    return RedirectResponse("/console/login", status_code=303)


def build_app(services: ApiServices) -> FastAPI:
    app = declare_app()
    app.state.services = services
    app.state.rate_limit = RateLimit(services.settings.requests_per_minute)
    app.state.failed_auth = RateLimit(services.settings.failed_auth_per_minute)
    app.state.open_streams = Counter[str]()
    return app


def openapi_document() -> dict[str, Any]:
    """The document published as docs/openapi.json (a test keeps it current)."""
    return declare_app().openapi()


def declare_app() -> FastAPI:
    """Routes, handlers and middleware; `build_app` gives it the services it serves with."""
    app = FastAPI(
        title="FrameFleet API",
        version=VERSION,
        description="Submit, follow and cancel video-generation jobs; the fleet and the money. "
        "Every route needs `Authorization: Bearer <token>` (`framefleet tokens create`).",
        docs_url=None,  # Swagger UI loads its script from a CDN; the document is /openapi.json
        redoc_url=None,
    )
    app.add_exception_handler(StarletteHTTPException, _problem)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.add_exception_handler(console.LoginNeeded, _to_login)
    app.include_router(jobs_routes.router)
    app.include_router(job_change_routes.router)
    app.include_router(fleet_routes.router)
    app.include_router(instance_routes.router)
    app.include_router(history_routes.router)
    app.include_router(token_routes.router)
    app.include_router(dead_letter_routes.router)
    app.include_router(operator_routes.router)
    app.include_router(notice_routes.router)
    app.include_router(events.router)
    app.include_router(console.router)
    app.include_router(console_pages.router)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    @app.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse("/console", status_code=307)

    app.add_middleware(SecurityHeaders)
    return app
