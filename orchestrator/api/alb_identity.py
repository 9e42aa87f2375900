"""Single sign-on through the load balancer (README, "Single sign-on"): the ALB authenticates
a person with the organisation's OIDC identity provider and passes their claims to the API in
`x-amzn-oidc-data`, a JWT it signs (ES256) with a key of the region's, published at
`https://public-keys.auth.elb.<region>.amazonaws.com/<kid>`. The API believes it only when
the signature checks out with that key, the signer is this deployment's load balancer and it
has not expired; a group claim names the person's teams, or makes them an operator (every
team). PyJWT does the verification; the keys are fetched once each and kept."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import jwt

from orchestrator.api.auth import Caller, Scope

log = logging.getLogger(__name__)
HEADER = "x-amzn-oidc-data"
PERSON_SCOPES = frozenset({Scope.READ, Scope.SUBMIT, Scope.CANCEL})


@dataclass(frozen=True)
class SsoRule:
    load_balancer_arn: str  # the only signer believed
    keys_url: str  # with {kid} (and {region} filled in)
    group_claim: str = "groups"
    operator_groups: frozenset[str] = frozenset()  # every team
    team_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # group -> teams


class AlbIdentity:
    def __init__(self, rule: SsoRule, fetch_key: Callable[[str], str]) -> None:
        """`fetch_key`: a key's URL -> its PEM text (an HTTP GET with a short timeout)."""
        self._rule, self._fetch = rule, fetch_key
        self._keys: dict[str, str] = {}

    def caller(self, token: str) -> Caller | None:
        """The person the header names, with their teams; None when it is not to be believed
        or names no team of theirs."""
        try:
            claims = self._verified(token)
        except (jwt.PyJWTError, OSError, ValueError) as error:
            log.warning("single sign-on header refused: %s", type(error).__name__)
            return None
        if claims is None:
            return None
        groups = _groups(claims.get(self._rule.group_claim))
        subject = str(claims.get("email") or claims.get("sub") or "someone")[:100]
        if groups & self._rule.operator_groups:
            return Caller(f"sso:{subject}", subject, PERSON_SCOPES, None)
        teams = {t for g in groups for t in self._rule.team_groups.get(g, ())}
        if not teams:
            return None
        return Caller(f"sso:{subject}", subject, PERSON_SCOPES, frozenset(teams))

    def _verified(self, token: str) -> dict[str, object] | None:
        # The ALB pads its base64url; PyJWT reads it unpadded.
        token = ".".join(part.rstrip("=") for part in token.split("."))
        header = jwt.get_unverified_header(token)
        kid, signer = str(header.get("kid", "")), header.get("signer")
        if header.get("alg") != "ES256" or signer != self._rule.load_balancer_arn:
            return None
        if not kid or "/" in kid or len(kid) > 128:
            return None
        key = self._keys.get(kid)
        if key is None:
            key = self._fetch(self._rule.keys_url.format(kid=kid))
            self._keys[kid] = key
        claims: dict[str, object] = jwt.decode(
            token,
            key,
            algorithms=["ES256"],
            options={"require": ["exp"], "verify_aud": False},
            leeway=30,
        )
        return claims


def _groups(value: object) -> set[str]:
    """A group claim: a list, or one string of names split by commas or spaces."""
    if isinstance(value, list):
        return {str(v) for v in value}
    if isinstance(value, str):
        return {v for v in value.replace(",", " ").split() if v}
    return set()
