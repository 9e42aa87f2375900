"""Single sign-on through the load balancer (issue 49): the API believes the ALB's signed
claims header only when its signature checks out with the region's published key, its signer
is this deployment's load balancer and it has not expired; a group claim gives the person
their teams, or every team; a forged, foreign or stale header is not believed."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from orchestrator.api.alb_identity import AlbIdentity, SsoRule
from orchestrator.api.auth import Scope
from tests.support.alb_signer import ALB_ARN, AlbSigner, served_keys
from tests.support.served_api import ServedApi, serve_api

ALB = AlbSigner()
TEAMS = {"video-marketing": ["marketing"], "video-research": ["research", "labs"]}


def _identity(signer: AlbSigner = ALB) -> AlbIdentity:
    rule = SsoRule(
        ALB_ARN,
        "https://keys.example/{kid}",
        "groups",
        frozenset({"ops"}),
        {group: tuple(teams) for group, teams in TEAMS.items()},
    )
    return AlbIdentity(rule, lambda url: signer.public_pem)


def test_a_signed_header_names_a_person_and_their_teams() -> None:
    identity = _identity()
    person = identity.caller(ALB.header(groups=["video-research", "cooking"]))
    assert person is not None
    assert (person.name, person.teams) == ("ada@example.com", frozenset({"research", "labs"}))
    assert person.may(Scope.SUBMIT)
    assert not person.may(Scope.ADMIN)  # tokens and the fleet's changes stay with tokens
    operator = identity.caller(ALB.header(groups="ops, video-marketing"))
    assert operator is not None
    assert operator.teams is None


@pytest.mark.parametrize(
    "header",
    [
        AlbSigner(kid=ALB.kid).header(groups=["ops"]),  # another key under the same kid: forged
        ALB.header(signer=ALB_ARN.replace("ff-api", "other"), groups=["ops"]),
        ALB.header(ttl=-120, groups=["ops"]),  # expired
        ALB.header(groups=["cooking"]),  # no team of ours
        "not.a.token",
        "",
    ],
)
def test_a_header_not_to_be_believed_names_nobody(header: str) -> None:
    assert _identity().caller(header) is None


@pytest.fixture(scope="module")
def sso_api(moto_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedApi]:
    with served_keys(ALB) as keys_url:
        env = {
            "FRAMEFLEET_API__SSO__LOAD_BALANCER_ARN": ALB_ARN,
            "FRAMEFLEET_API__SSO__KEYS_URL": keys_url,
            "FRAMEFLEET_API__SSO__OPERATOR_GROUPS": json.dumps(["ops"]),
            "FRAMEFLEET_API__SSO__TEAM_GROUPS": json.dumps(TEAMS),
        }
        yield from serve_api(moto_endpoint, tmp_path_factory.mktemp("sso"), extra_env=env)


def test_the_console_and_the_api_take_the_signed_on_person(sso_api: ServedApi) -> None:
    signed = {"x-amzn-oidc-data": ALB.header(groups=["video-marketing"])}
    page = sso_api.call("GET", "/console", None, headers=signed)
    assert page.status == 200
    assert "ada@example.com" in str(page.body)
    assert sso_api.call("GET", "/v1/jobs", None, headers=signed).status == 200
    assert sso_api.call("GET", "/v1/fleet", None, headers=signed).status == 403  # one team
    # A change from the console's page carries its header (CSRF), as with the cookie.
    cancel = sso_api.call("POST", "/v1/jobs/any/cancel", None, headers=signed)
    assert cancel.status == 403
    forged = {"x-amzn-oidc-data": AlbSigner(kid=ALB.kid).header(groups=["ops"])}
    assert sso_api.call("GET", "/v1/jobs", None, headers=forged).status == 401
    assert sso_api.call("GET", "/console", None, headers=forged).status == 303  # to log in
    assert sso_api.call("GET", "/v1/jobs", "reader").status == 200  # tokens work as before
