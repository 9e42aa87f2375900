"""The web console: server-rendered pages (Jinja2, autoescaped) over the same data and tokens
as the API, with a little JavaScript for live updates (the event stream), submitting and
cancelling. Log in with a token; it is kept in an HttpOnly, SameSite=Strict cookie."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, urlencode, urlsplit

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from kernel.job_state import JobState
from orchestrator.api.auth import Caller, Scope, caller_of
from orchestrator.api.fleet_routes import fleet_view, period_bounds
from orchestrator.api.jobs_routes import TagFilter, job_detail, job_summaries
from orchestrator.api.money_groups import GROUPINGS, Grouping, grouped
from orchestrator.api.operator_routes import attempt_logs
from orchestrator.api.ports import ApiServices
from orchestrator.api.security import (
    COOKIE,
    check_token,
    count_failure,
    every_team,
    refuse_if_failing,
    services,
    signed_on,
)
from orchestrator.api.views import costs_view, decode_cursor, encode_cursor
from orchestrator.costs.money import apportion, cents
from orchestrator.store.job_pages import JobFilter

router = APIRouter(prefix="/console", include_in_schema=False)
templates = Jinja2Templates(directory=Path(__file__).parent / "templates")
# Money on every page in cents, with thousands separators: 1,234.57.
templates.env.filters["cents"] = lambda usd: f"{cents(Decimal(str(usd))):,.2f}"
COOKIE_SECONDS = 12 * 3600
LOGIN_BODY_LIMIT = 4096
QUEUE_ROWS = 50  # a page of the queue
LOGIN_CSRF_COOKIE = "framefleet_login_csrf"


class LoginNeeded(Exception):
    pass


def console_caller(request: Request) -> Caller:
    try:
        caller = signed_on(request) or check_token(
            request, request.cookies.get(COOKIE), from_cookie=True
        )
    except HTTPException as error:
        if error.status_code == 401:
            raise LoginNeeded from None
        raise
    if not caller.may(Scope.READ):
        raise HTTPException(403, "this token lacks the 'read' scope the console needs")
    return caller


Viewer = Annotated[Caller, Depends(console_caller)]
Services = Annotated[ApiServices, Depends(services)]


def page(request: Request, name: str, caller: Caller | None, **context: Any) -> HTMLResponse:
    logout = session_csrf(request.cookies.get(COOKIE, "")) if caller is not None else ""
    return templates.TemplateResponse(
        request, name, {"caller": caller, "logout_csrf": logout, **context}
    )


def session_csrf(token: str) -> str:
    """The logout form's CSRF field: derived from the session's cookie, which a page
    elsewhere can neither read nor send (SameSite=Strict), so it cannot forge the field."""
    return hmac.new(token.encode(), b"framefleet console logout", hashlib.sha256).hexdigest()


@router.get("/login")
def login_page(request: Request) -> HTMLResponse:
    return _login_page(request, None, 200)


def _login_page(request: Request, error: str | None, status: int) -> HTMLResponse:
    """The form with a fresh CSRF token, also set as a cookie only this site's pages send."""
    csrf = secrets.token_urlsafe(24)
    response = page(request, "login.html", None, error=error, csrf=csrf)
    response.status_code = status
    response.set_cookie(
        LOGIN_CSRF_COOKIE,
        csrf,
        max_age=3600,
        httponly=True,
        samesite="strict",
        secure=services(request).settings.secure_cookie,
        path="/console/login",
    )
    return response


def _same_origin(request: Request, form: dict[str, list[str]]) -> bool:
    """The form came from this site's own login page: its CSRF field matches the cookie
    that page set (a page elsewhere can read neither), and the Origin, if sent, is ours."""
    if not _origin_is_ours(request):
        return False
    expected = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    sent = form.get("csrf", [""])[0]
    return bool(expected) and hmac.compare_digest(expected.encode(), sent.encode())


def _origin_is_ours(request: Request) -> bool:
    origin = request.headers.get("origin")
    # The host only: behind a TLS load balancer the browser's scheme is not the server's.
    # "null": what browsers send under the console's Referrer-Policy: no-referrer; the
    # SameSite=Strict cookies are what no other site can send.
    return origin in (None, "null") or urlsplit(origin).netloc == request.url.netloc


@router.post("/login")
async def login(request: Request, services_: Services) -> Response:
    refuse_if_failing(request)
    body = await request.body()
    form = {} if len(body) > LOGIN_BODY_LIMIT else parse_qs(body.decode("utf-8", "replace"))
    if not _same_origin(request, form):
        error = "This login form has expired or came from another site; log in again."
        return _login_page(request, error, 403)
    token = form.get("token", [""])[0].strip()
    caller = caller_of(services_.store.api_tokens, token, services_.clock.now()) if token else None
    if caller is None or not caller.may(Scope.READ):
        count_failure(request, token)
        error = "That token is unknown, revoked, or lacks the read scope."
        return _login_page(request, error, 401)
    redirect = RedirectResponse("/console", status_code=303)
    redirect.set_cookie(
        COOKIE,
        token,
        max_age=COOKIE_SECONDS,
        httponly=True,
        samesite="strict",
        secure=services_.settings.secure_cookie,
        path="/",
    )
    return redirect


@router.post("/logout")
async def logout(request: Request) -> Response:
    """Ends the session only for the console's own form: a cross-site POST ended it."""
    body = await request.body()
    form = {} if len(body) > LOGIN_BODY_LIMIT else parse_qs(body.decode("utf-8", "replace"))
    token = request.cookies.get(COOKIE, "")
    sent = form.get("csrf", [""])[0]
    own = bool(token) and hmac.compare_digest(session_csrf(token).encode(), sent.encode())
    if not (own and _origin_is_ours(request)):
        raise HTTPException(403, "this logout did not come from the console's own page")
    redirect = RedirectResponse("/console/login", status_code=303)
    redirect.delete_cookie(COOKIE, path="/")
    return redirect


@router.get("")
def queue(
    request: Request,
    caller: Viewer,
    services_: Services,
    state: JobState | None = None,
    team: TagFilter = None,
    project: TagFilter = None,
    customer: TagFilter = None,
    after: str | None = None,
) -> HTMLResponse:
    store = services_.store
    teams = caller.team_list()
    counts = store.count_by_state(teams)
    # The caller's teams' newest jobs, a page at a time, filtered as the API filters them;
    # the submit form starts from the newest of them.
    cursor = decode_cursor(after) if after else None
    tags = {"team": team, "project": project, "customer": customer}
    chosen = {name: value for name, value in tags.items() if value}
    where = JobFilter((state,) if state else (), tuple(chosen.items()), teams=teams)
    found = store.pages.job_page(where, cursor, QUEUE_ROWS + 1)
    recent = found[:QUEUE_ROWS]
    jobs = job_summaries(services_, recent)
    template = _submit_template(
        recent[0].spec.model_dump(mode="json", by_alias=True) if recent else None
    )
    return page(
        request,
        "queue.html",
        caller,
        jobs=jobs,
        template=json.dumps(template),
        counts=[(state.value, counts.get(state, 0)) for state in JobState],
        shown_state=state.value if state else None,
        tags=tags,
        tag_query=urlencode(chosen),
        older=encode_cursor(recent[-1]) if len(found) > QUEUE_ROWS else None,
        may_submit=caller.may(Scope.SUBMIT),
        may_cancel=caller.may(Scope.CANCEL),
    )


def _submit_template(newest: dict[str, Any] | None) -> dict[str, Any]:
    """The submit form starts from the newest job's spec (its model, output and tags)."""
    template = dict(
        newest
        or {
            "schema": "framefleet.job/v1",
            "model": "wan/wan2.1-t2v-1.3b",
            "output": "s3://my-bucket/videos/",
            "prompt": "",
        }
    )
    for name in ("job_id", "deadline"):
        template.pop(name, None)
    return template


@router.get("/jobs/{job_id}")
def job_page(job_id: str, request: Request, caller: Viewer, services_: Services) -> HTMLResponse:
    job = job_detail(services_, caller, job_id)
    return page(
        request,
        "job.html",
        caller,
        job=job,
        # Each category in cents, adding up to the total's cents (largest remainder).
        cost_cents=apportion({k: Decimal(v) for k, v in job.cost.by_category.items()})
        if job.cost
        else {},
        logs=attempt_logs(services_, job),
        may_cancel=caller.may(Scope.CANCEL),
    )


@router.get("/fleet")
def fleet_page(request: Request, caller: Viewer, services_: Services) -> HTMLResponse:
    every_team(caller)
    fleet = fleet_view(services_)
    now = services_.clock.now()
    gone = services_.store.pages.gone_between(now - timedelta(hours=24), now + timedelta(seconds=1))
    hours = Counter(int((now - g.gone_at).total_seconds() // 3600) for g in gone)
    per_hour = [(f"{23 - h}", hours.get(23 - h, 0)) for h in range(24)]  # oldest first
    groups = Counter((i.availability_zone, i.market) for i in fleet.instances)
    return page(
        request,
        "fleet.html",
        caller,
        fleet=fleet,
        per_hour=per_hour,
        peak=max([1, *hours.values()]),
        groups=sorted(groups.items()),
    )


@router.get("/costs")
def costs_page(
    request: Request,
    caller: Viewer,
    services_: Services,
    period: Literal["day", "week", "month"] = "day",
    since: datetime | None = None,
    until: datetime | None = None,
    group: Grouping = "team",
) -> HTMLResponse:
    since, until = period_bounds(services_, period, as_utc(since), as_utc(until))
    summary, incomplete = services_.period_costs(since, until, caller.team_list())
    view = costs_view(summary, incomplete)
    groups = grouped(summary, group)
    peak = max([1.0, *(float(usd) for _, usd in groups)])
    return page(
        request,
        "costs.html",
        caller,
        costs=view,
        period=period,
        custom=since is not None and "since" in request.query_params,
        groups=groups,
        group=group,
        groupings=GROUPINGS,
        total=summary.total,
        peak=peak,
    )


def as_utc(moment: datetime | None) -> datetime | None:
    """A moment from a form: naive means UTC."""
    return moment if moment is None or moment.tzinfo else moment.replace(tzinfo=UTC)
