"""The authenticator chain of docs/cluster.md#authenticator-chain: front proxy, client certificate,
bearer token, anonymous, tried in that order; the first success wins.

Error handling follows k8s.io/apiserver's union authenticator: an authenticator that errs
does not stop the chain, but when none succeeds any error makes the request 401 and
anonymous is not tried. The one departure is a TokenReview that cannot be reached: it makes
the outcome unknown, so it is reported as AuthenticationUnavailable (503 + Retry-After)
instead of a 401 that would make clients drop good credentials.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import re
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, Protocol

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from visibility_server.authn.config import AuthenticationConfig
from visibility_server.authn.interface import (
    AuthenticationFailed,
    NoCredentials,
    RequestCredentials,
)
from visibility_server.authz.identity import ANONYMOUS, UserInfo, with_authenticated_group

UNAUTHORIZED_MESSAGE: Final = "Unauthorized"
IMPERSONATION_MESSAGE: Final = (
    "impersonation is not supported by this server; send the request through kube-apiserver"
)
INVALID_BEARER_TOKEN: Final = "invalid bearer token"
# What Go's x509 authenticator records for a client certificate (docs/visibility-api.md's SAR
# example carries it), so a SAR for a certificate user looks the same as upstream's.
CREDENTIAL_ID_KEY: Final = "authentication.kubernetes.io/credential-id"

DEFAULT_TOKEN_CACHE_TTL: Final = 10.0
# Direct callers can send any number of distinct tokens; the cache must not grow with them.
DEFAULT_TOKEN_CACHE_SIZE: Final = 8192
# Peer certificates repeat (kube-apiserver keeps its connections open), and checking a
# signature per request would be the most expensive step of authentication.
_CERT_CACHE_SIZE: Final = 1024

_IMPERSONATE_PREFIX: Final = "impersonate-"
_BAD_ESCAPE: Final = re.compile(r"%(?![0-9A-Fa-f]{2})")


class TokenReviewer(Protocol):
    """Asks kube-apiserver about a bearer token (TokenReview)."""

    async def review(self, token: str) -> UserInfo | None:
        """The user when `status.authenticated` is true, None when it is false; raises
        AuthenticationUnavailable when kube-apiserver cannot answer (timeout, connection
        error, 429, 5xx)."""
        ...


def reject_impersonation(headers: Iterable[tuple[str, str]]) -> bool:
    """Whether a request carries any `Impersonate-*` header (403, docs/visibility-api.md#errors).

    kube-apiserver resolves impersonation and strips these headers before proxying, so on
    a request that reaches us they mean a direct caller asking for something we do not do.
    """
    return any(name.lower().startswith(_IMPERSONATE_PREFIX) for name, _ in headers)


class _RejectedError(Exception):
    """An authenticator erred: counts towards 401 unless a later one succeeds."""


class _ValidityError(_RejectedError):
    """The leaf is expired or not yet valid (the message quotes the current time)."""


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What one authenticator concluded about a certificate, and the time window in which
    that conclusion holds: strictly between two instants at which the validity of the
    leaf or of one of its issuers flips (None: unbounded on that side)."""

    after: datetime | None
    before: datetime | None
    user: UserInfo | None
    error: str | None

    def holds_at(self, now: datetime) -> bool:
        return (self.after is None or self.after < now) and (
            self.before is None or now < self.before
        )

    def outcome(self) -> UserInfo | None:
        if self.error is not None:
            raise _RejectedError(self.error)
        return self.user


@dataclass(frozen=True, slots=True)
class _PeerCert:
    """A parsed peer certificate and the CAs of each bundle that directly issued it.

    The certificate checks (issuer, validity, EKU, CN) give the same answer for the same
    DER until a validity bound of the leaf or of an issuer is crossed, so each
    authenticator's verdict is kept with the window in which it holds (`verdict`): the
    requests of a kept-alive connection, and of every connection presenting the same
    certificate, skip them. Only the headers are read per request.
    """

    cert: x509.Certificate | None  # None: not parseable
    requestheader_issuers: tuple[x509.Certificate, ...]
    client_issuers: tuple[x509.Certificate, ...]
    # Sorted instants at which a validity check of the leaf or of an issuer flips.
    bounds: tuple[datetime, ...] = ()
    verdicts: dict[str, _Verdict] = field(default_factory=dict, compare=False)

    def verdict(
        self, authenticator: str, now: datetime, check: Callable[[], UserInfo | None]
    ) -> UserInfo | None:
        """`check()`, or its memoized outcome (a user, None, or the same error raised)
        while `now` stays inside the window it was decided in."""
        known = self.verdicts.get(authenticator)
        if known is not None and known.holds_at(now):
            return known.outcome()
        user, error, timeless = None, None, True
        try:
            user = check()
        except _RejectedError as err:
            error, timeless = str(err), not isinstance(err, _ValidityError)
        window = _window(self.bounds, now)
        # A validity error quotes the current time: not worth keeping, and rare.
        if window is not None and timeless:
            self.verdicts[authenticator] = _Verdict(*window, user, error)
        if error is not None:
            raise _RejectedError(error)
        return user


def _window(
    bounds: Sequence[datetime], now: datetime
) -> tuple[datetime | None, datetime | None] | None:
    """The open interval between the bounds around `now`; None when `now` is a bound."""
    i = bisect.bisect_left(bounds, now)
    if i < len(bounds) and bounds[i] == now:
        return None
    return (bounds[i - 1] if i else None, bounds[i] if i < len(bounds) else None)


@dataclass(slots=True)
class _State:
    """What one request reads: swapped as a whole by `update`, so a request never mixes
    two configurations, and the certificate cache never outlives the CAs it was made for."""

    config: AuthenticationConfig
    certs: OrderedDict[bytes, _PeerCert] = field(default_factory=OrderedDict)

    def peer_cert(self, der: bytes) -> _PeerCert:
        cached = self.certs.get(der)
        if cached is not None:
            self.certs.move_to_end(der)
            return cached
        facts = self._inspect(der)
        self.certs[der] = facts
        if len(self.certs) > _CERT_CACHE_SIZE:
            self.certs.popitem(last=False)
        return facts

    def _inspect(self, der: bytes) -> _PeerCert:
        try:
            cert = x509.load_der_x509_certificate(der)
        except ValueError:
            return _PeerCert(None, (), ())
        requestheader = _direct_issuers(cert, self.config.requestheader_cas)
        client = _direct_issuers(cert, self.config.client_cas)
        bounds = {
            instant
            for c in {cert, *requestheader, *client}
            for instant in (c.not_valid_before_utc, c.not_valid_after_utc)
        }
        return _PeerCert(cert, requestheader, client, tuple(sorted(bounds)))


class AuthenticatorChain:
    """The Authenticator of the visibility server; `update` swaps its configuration when
    the ConfigMap changes, without disturbing requests in flight or the token cache."""

    def __init__(
        self,
        config: AuthenticationConfig,
        token_reviewer: TokenReviewer | None,
        *,
        token_cache_ttl: float = DEFAULT_TOKEN_CACHE_TTL,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self._state = _State(config)
        self._tokens = (
            None
            if token_reviewer is None
            else TokenCache(token_reviewer, ttl=token_cache_ttl, clock=clock)
        )
        self._now = now or _utcnow

    @property
    def config(self) -> AuthenticationConfig:
        return self._state.config

    def update(self, config: AuthenticationConfig) -> None:
        """Use `config` for every request that starts from now on."""
        if config != self._state.config:
            self._state = _State(config)

    async def authenticate(self, credentials: RequestCredentials) -> UserInfo:
        state = self._state
        errors: list[str] = []
        peer = (
            None
            if credentials.peer_cert_der is None
            else state.peer_cert(credentials.peer_cert_der)
        )
        now = self._now()
        user: UserInfo | None = None
        try:
            user = _front_proxy(state.config, peer, credentials, now)
        except _RejectedError as err:
            errors.append(str(err))
        if user is None and peer is not None:
            try:
                # With the authenticated group already: the cached user is final.
                user = peer.verdict("client", now, lambda: _client_certificate(peer, now))
            except _RejectedError as err:
                errors.append(str(err))
        if user is None and self._tokens is not None and credentials.bearer_token:
            # The reviewer's AuthenticationUnavailable passes through: the token might have
            # been good, so the outcome is unknown rather than a failure.
            user = await self._tokens.review(credentials.bearer_token)
            if user is None:
                errors.append(INVALID_BEARER_TOKEN)
        if user is not None:
            return with_authenticated_group(user)
        if errors:
            raise AuthenticationFailed("; ".join(errors))
        if state.config.anonymous_auth:
            return ANONYMOUS
        raise NoCredentials("no credentials, and anonymous requests are disabled")


def _front_proxy(
    config: AuthenticationConfig,
    peer: _PeerCert | None,
    credentials: RequestCredentials,
    now: datetime,
) -> UserInfo | None:
    """Authenticator 1: a front-proxy certificate vouches for the `X-Remote-*` headers."""
    if peer is None or peer.cert is None or not peer.requestheader_issuers:
        return None
    cert, issuers = peer.cert, peer.requestheader_issuers

    def check() -> None:
        _check_usable(cert, issuers, now)
        common_name = _common_name(cert)
        if config.allowed_names and common_name not in config.allowed_names:
            # Go's text, verbatim (it is what operators search for), then the list it
            # was checked against: the log line names both (docs/operations.md).
            allowed = ", ".join(config.allowed_names)
            raise _RejectedError(
                f"x509: subject with cn={common_name} is not in the allowed list"
                f" (requestheader-allowed-names: {allowed})"
            )

    peer.verdict("front-proxy", now, check)  # raises when the proxy is not accepted
    return front_proxy_user(config, credentials)


def front_proxy_user(
    config: AuthenticationConfig, credentials: RequestCredentials
) -> UserInfo | None:
    """The identity in the front-proxy headers (docs/cluster.md#front-proxy-headers), or None
    without a username.

    Only meaningful once the certificate was accepted; exposed for tests and for callers
    that authenticate the proxy some other way.
    """
    name = _first_value(credentials, config.username_headers)
    if not name:
        return None
    groups = [
        value for header in config.group_headers for value in credentials.values(header) if value
    ]
    return UserInfo(
        name,
        uid=_first_value(credentials, config.uid_headers),
        groups=tuple(groups),
        extra=_extras(credentials.headers, config.extra_headers_prefixes),
    )


def _client_certificate(peer: _PeerCert, now: datetime) -> UserInfo:
    """Authenticator 2: a certificate from a client-ca CA is the user (CN) and groups (O),
    plus `system:authenticated`."""
    if peer.cert is None:
        raise _RejectedError("x509: malformed client certificate")
    if not peer.client_issuers:
        raise _RejectedError(
            f"verifying certificate {_describe(peer.cert)} failed: "
            "x509: certificate signed by unknown authority"
        )
    _check_usable(peer.cert, peer.client_issuers, now)
    common_name = _common_name(peer.cert)
    if not common_name:
        raise _RejectedError(f"x509: certificate {_describe(peer.cert)} has an empty subject CN")
    organizations = [
        _attribute_text(attribute.value)
        for attribute in peer.cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    ]
    credential_id = "X509SHA256=" + peer.cert.fingerprint(hashes.SHA256()).hex()
    return with_authenticated_group(
        UserInfo(
            common_name,
            groups=tuple(organizations),
            extra={CREDENTIAL_ID_KEY: (credential_id,)},
        )
    )


class TokenCache:
    """TokenReview results, success and failure alike, for `ttl` seconds
    (docs/cluster.md#authenticator-chain).

    Keyed by the token's SHA-256: the raw token is never kept. Concurrent reviews of one
    token share a single TokenReview call. Unavailability is never cached.
    """

    def __init__(
        self,
        reviewer: TokenReviewer,
        *,
        ttl: float = DEFAULT_TOKEN_CACHE_TTL,
        size: int = DEFAULT_TOKEN_CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._reviewer = reviewer
        self._ttl = ttl
        self._size = size
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[float, UserInfo | None]] = OrderedDict()
        self._pending: dict[bytes, asyncio.Future[UserInfo | None]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    async def review(self, token: str) -> UserInfo | None:
        key = hashlib.sha256(token.encode("utf-8")).digest()
        entry = self._entries.get(key)
        if entry is not None:
            expires, user = entry
            if self._clock() < expires:
                self._entries.move_to_end(key)
                return user
            del self._entries[key]
        pending = self._pending.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._reviewer.review(token))
            self._pending[key] = pending
            pending.add_done_callback(lambda done: self._settle(key, done))
        # A caller that gives up (client gone) must not cancel the review others wait for.
        return await asyncio.shield(pending)

    def _settle(self, key: bytes, done: asyncio.Future[UserInfo | None]) -> None:
        if self._pending.get(key) is done:
            del self._pending[key]
        if done.cancelled() or done.exception() is not None:
            # exception() also marks it retrieved when every waiter has left.
            return
        self._entries[key] = (self._clock() + self._ttl, done.result())
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


def _direct_issuers(
    cert: x509.Certificate, cas: Sequence[x509.Certificate]
) -> tuple[x509.Certificate, ...]:
    # Python < 3.13 shows us the leaf only, so "issued by a CA of the bundle" means
    # directly issued (docs/cluster.md#tls-in-python): an intermediate counts when it is in the
    # bundle.
    issuers: list[x509.Certificate] = []
    for ca in cas:
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        issuers.append(ca)
    return tuple(issuers)


def _check_usable(
    cert: x509.Certificate, issuers: Sequence[x509.Certificate], now: datetime
) -> None:
    """Validity of the leaf and of at least one issuer, and a client-usable EKU: the part
    of Go's `Certificate.Verify` that the signature check above does not cover."""
    problem = _validity_problem(cert, now)
    if problem is not None:
        raise _ValidityError(problem)
    if all(_validity_problem(ca, now) is not None for ca in issuers):
        raise _RejectedError(
            f"x509: certificate {_describe(cert)} was issued by a CA that has expired "
            "or is not yet valid"
        )
    try:
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return
    except ValueError as err:
        raise _RejectedError(f"x509: malformed certificate extensions: {err}") from None
    if (
        ExtendedKeyUsageOID.CLIENT_AUTH not in usage
        and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in usage
    ):
        raise _RejectedError("x509: certificate specifies an incompatible key usage")


def _validity_problem(cert: x509.Certificate, now: datetime) -> str | None:
    if now < cert.not_valid_before_utc:
        return (
            "x509: certificate has expired or is not yet valid: current time "
            f"{_rfc3339(now)} is before {_rfc3339(cert.not_valid_before_utc)}"
        )
    if now > cert.not_valid_after_utc:
        return (
            "x509: certificate has expired or is not yet valid: current time "
            f"{_rfc3339(now)} is after {_rfc3339(cert.not_valid_after_utc)}"
        )
    return None


def _common_name(cert: x509.Certificate) -> str:
    # Go's pkix.Name keeps the last CN when a subject has several.
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return _attribute_text(names[-1].value) if names else ""


def _attribute_text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def _describe(cert: x509.Certificate) -> str:
    return f'SN={cert.serial_number}, subject="{cert.subject.rfc4514_string()}"'


def _first_value(credentials: RequestCredentials, header_names: Sequence[str]) -> str:
    # Go's Header.Get per configured name: the first line of the first header whose first
    # line is non-empty.
    for header in header_names:
        values = credentials.values(header)
        if values and values[0]:
            return values[0]
    return ""


def _extras(
    headers: Sequence[tuple[str, str]], prefixes: Sequence[str]
) -> dict[str, tuple[str, ...]]:
    extra: dict[str, list[str]] = {}
    # Prefixes outermost, as in Go, so values of one key keep the order of the prefix list
    # and then of the header lines.
    for prefix in prefixes:
        lowered = prefix.lower()
        for name, value in headers:
            lowered_name = name.lower()
            if lowered_name.startswith(lowered):
                key = unescape_extra_key(lowered_name[len(lowered) :])
                extra.setdefault(key, []).append(value)
    return {key: tuple(values) for key, values in extra.items()}


def unescape_extra_key(encoded: str) -> str:
    """Go's `url.PathUnescape` of a lower-cased extra key; the raw key when that fails
    (a `%` not followed by two hex digits, or bytes that are not UTF-8), because upstream
    records malformed keys rather than dropping them."""
    if "%" not in encoded:
        return encoded
    if _BAD_ESCAPE.search(encoded):
        return encoded
    try:
        return urllib.parse.unquote_to_bytes(encoded).decode("utf-8")
    except UnicodeDecodeError:
        return encoded


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = [
    "CREDENTIAL_ID_KEY",
    "DEFAULT_TOKEN_CACHE_SIZE",
    "DEFAULT_TOKEN_CACHE_TTL",
    "IMPERSONATION_MESSAGE",
    "INVALID_BEARER_TOKEN",
    "UNAUTHORIZED_MESSAGE",
    "AuthenticatorChain",
    "TokenCache",
    "TokenReviewer",
    "front_proxy_user",
    "reject_impersonation",
    "unescape_extra_key",
]
