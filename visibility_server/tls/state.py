"""The embedded state folder (docs/product.md#command-line; docs/cluster.md#embedded-mode).

    DIR/ca.crt, ca.key          the CA; also the client CA of embedded mode
    DIR/tls.crt, tls.key        the serving certificate
    DIR/admin.crt, admin.key    CN=queuescope-admin, O=system:masters
    DIR/kubeconfig              kubectl as the admin, against the embedded server
    DIR/users/NAME.{crt,key,kubeconfig}   minted by `queuescope certs client`

The CA is made once and then kept: client certificates handed out earlier must stay valid
across restarts. What is derived from it (serving and admin certificates, the kubeconfig)
is reissued on start whenever it no longer fits.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.x509.oid import NameOID

from visibility_server.authz.identity import MASTERS_GROUP
from visibility_server.tls.authority import (
    DEFAULT_KEY_TYPE,
    DEFAULT_NAMESPACE,
    DEFAULT_SERVICE,
    CertifiedKey,
    KeyType,
    check_group_name,
    check_user_name,
    create_ca,
    due_for_renewal,
    issue_client_cert,
    issue_serving_cert,
    issued_by,
    require_aware,
    serving_sans,
)
from visibility_server.tls.errors import CertsError, CertsInputError
from visibility_server.tls.files import (
    SECRET_MODE,
    CertFolder,
    FolderFile,
    locked,
    make_private_dir,
    read_certified_key,
    write_atomic,
    write_certified_key,
)
from visibility_server.tls.kubeconfig import kubeconfig_server, render_kubeconfig
from visibility_server.tls.verify import validate_serving_pair

log = logging.getLogger(__name__)

DEFAULT_STATE_DIR = Path(".queuescope")
DEFAULT_EMBEDDED_SERVER = "https://127.0.0.1:8443"
ADMIN_USER = "queuescope-admin"
# The admin is a member of `system:masters`, which the authorizer allows without a review
# (docs/cluster.md#decision-pipeline).
ADMIN_GROUPS: tuple[str, ...] = (MASTERS_GROUP,)


@dataclass(frozen=True)
class StatePaths(CertFolder):
    """Where each file of a state folder lives."""

    admin_cert = FolderFile("admin.crt")
    admin_key = FolderFile("admin.key")
    kubeconfig = FolderFile("kubeconfig")
    users_dir = FolderFile("users")

    def user_cert(self, user: str) -> Path:
        return self.users_dir / f"{user}.crt"

    def user_key(self, user: str) -> Path:
        return self.users_dir / f"{user}.key"

    def user_kubeconfig(self, user: str) -> Path:
        return self.users_dir / f"{user}.kubeconfig"


def embedded_serving_sans(server: str) -> tuple[str, ...]:
    """The SANs of the embedded serving certificate: the Service names (so the same
    certificate also passes the startup check), localhost, 127.0.0.1, and the host of
    the URL the kubeconfig points at, which kubectl verifies."""
    return serving_sans(DEFAULT_NAMESPACE, DEFAULT_SERVICE, (_server_host(server),))


def ensure_state_dir(
    path: Path,
    *,
    now: datetime,
    server: str = DEFAULT_EMBEDDED_SERVER,
    key_type: KeyType = DEFAULT_KEY_TYPE,
) -> StatePaths:
    """Create the state folder on first start; on later starts keep what still fits.

    Kept as is: the CA (an expired or broken one is an error, not silently replaced,
    because minted client certificates depend on it). Reissued: the serving and admin
    certificates when missing, not signed by the CA, expired, past two thirds of their
    lifetime, or (serving) missing a SAN for `server`; the kubeconfig whenever its
    content would differ (new admin certificate, another server URL).
    """
    require_aware(now)
    sans = embedded_serving_sans(server)
    paths = StatePaths(path)
    make_private_dir(path)
    with locked(path):
        ca = _load_or_create_ca(paths, now=now, key_type=key_type)
        _ensure_serving(paths, ca, sans=sans, now=now, key_type=key_type)
        admin = _ensure_admin(paths, ca, now=now, key_type=key_type)
        kubeconfig = render_kubeconfig(
            server=server,
            ca_pem=ca.cert_pem,
            client=admin,
            user=ADMIN_USER,
        )
        if _read_or_none(paths.kubeconfig) != kubeconfig:
            write_atomic(paths.kubeconfig, kubeconfig, mode=SECRET_MODE)
            log.info("wrote kubeconfig path=%s server=%s", paths.kubeconfig, server)
    return paths


def mint_client(
    state_dir: Path,
    user: str,
    groups: Sequence[str] = (),
    *,
    now: datetime,
    key_type: KeyType = DEFAULT_KEY_TYPE,
) -> Path:
    """Issue a client certificate for `user` (CN) in `groups` (O values) from the state
    folder's CA and write it with a kubeconfig; return the kubeconfig's path.

    Minting a user again replaces their files (a new key, the new group list). The
    kubeconfig points at the same server as the admin's.
    """
    require_aware(now)
    try:
        check_user_name(user)
        for group in groups:
            check_group_name(group)
    except ValueError as err:
        raise CertsInputError(str(err)) from None
    paths = StatePaths(state_dir)
    if not paths.ca_cert.exists():
        raise CertsInputError(
            f"{state_dir} is not a state folder (no ca.crt); `queuescope serve --embedded` "
            "creates it on first start"
        )
    with locked(state_dir):
        ca = _load_ca(paths, now=now)
        client = issue_client_cert(ca, user=user, groups=groups, now=now, key_type=key_type)
        server = kubeconfig_server(_read_or_none(paths.kubeconfig) or b"")
        make_private_dir(paths.users_dir)
        write_certified_key(client, paths.user_cert(user), paths.user_key(user))
        kubeconfig = render_kubeconfig(
            server=server or DEFAULT_EMBEDDED_SERVER,
            ca_pem=ca.cert_pem,
            client=client,
            user=user,
        )
        write_atomic(paths.user_kubeconfig(user), kubeconfig, mode=SECRET_MODE)
    log.info("minted client certificate user=%s groups=%s", user, ",".join(groups))
    return paths.user_kubeconfig(user)


def _load_or_create_ca(paths: StatePaths, *, now: datetime, key_type: KeyType) -> CertifiedKey:
    has_cert, has_key = paths.ca_cert.exists(), paths.ca_key.exists()
    if not has_cert and not has_key:
        ca = create_ca(now=now, key_type=key_type)
        write_certified_key(ca, paths.ca_cert, paths.ca_key)
        log.info("created CA path=%s", paths.ca_cert)
        return ca
    if not (has_cert and has_key):
        missing = paths.ca_key if has_cert else paths.ca_cert
        raise CertsError(
            f"{missing} is missing while its pair exists; restore it, or delete "
            f"{paths.root} to start over (client certificates minted from it stop working)"
        )
    return _load_ca(paths, now=now)


def _load_ca(paths: StatePaths, *, now: datetime) -> CertifiedKey:
    ca = read_certified_key(paths.ca_cert, paths.ca_key)
    if not ca.cert.not_valid_before_utc <= now <= ca.cert.not_valid_after_utc:
        raise CertsError(
            f"the CA {paths.ca_cert} is outside its validity "
            f"({ca.cert.not_valid_before_utc:%Y-%m-%d} to {ca.cert.not_valid_after_utc:%Y-%m-%d});"
            f" delete {paths.root} to start over"
        )
    return ca


def _ensure_serving(
    paths: StatePaths,
    ca: CertifiedKey,
    *,
    sans: Sequence[str],
    now: datetime,
    key_type: KeyType,
) -> None:
    reason = _serving_reissue_reason(paths, ca, sans=sans, now=now)
    if reason is None:
        return
    serving = issue_serving_cert(
        ca,
        namespace=DEFAULT_NAMESPACE,
        service=DEFAULT_SERVICE,
        now=now,
        key_type=key_type,
        extra_sans=sans,
    )
    write_certified_key(serving, paths.tls_cert, paths.tls_key)
    log.info("issued serving certificate path=%s reason=%s", paths.tls_cert, reason)


def _serving_reissue_reason(
    paths: StatePaths, ca: CertifiedKey, *, sans: Sequence[str], now: datetime
) -> str | None:
    cert_pem, key_pem = _read_or_none(paths.tls_cert), _read_or_none(paths.tls_key)
    if cert_pem is None or key_pem is None:
        return "missing"
    problems = validate_serving_pair(cert_pem, key_pem, required_sans=sans, now=now)
    if problems:
        return problems[0]
    cert = x509.load_pem_x509_certificates(cert_pem)[0]
    if not issued_by(cert, ca.cert):
        return "not signed by the CA"
    if due_for_renewal(cert, now):
        return "past two thirds of its lifetime"
    return None


def _ensure_admin(
    paths: StatePaths, ca: CertifiedKey, *, now: datetime, key_type: KeyType
) -> CertifiedKey:
    try:
        admin: CertifiedKey | None = read_certified_key(paths.admin_cert, paths.admin_key)
    except CertsError:
        admin = None
    if admin is not None and _admin_fits(admin.cert, ca, now):
        return admin
    admin = issue_client_cert(ca, user=ADMIN_USER, groups=ADMIN_GROUPS, now=now, key_type=key_type)
    write_certified_key(admin, paths.admin_cert, paths.admin_key)
    log.info("issued admin client certificate path=%s", paths.admin_cert)
    return admin


def _admin_fits(cert: x509.Certificate, ca: CertifiedKey, now: datetime) -> bool:
    names = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    groups = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    return (
        names == [ADMIN_USER]
        and sorted(groups) == sorted(ADMIN_GROUPS)
        and issued_by(cert, ca.cert)
        and cert.not_valid_before_utc <= now <= cert.not_valid_after_utc
        and not due_for_renewal(cert, now)
    )


def _server_host(server: str) -> str:
    try:
        parts = urlsplit(server)
        host = parts.hostname
        _ = parts.port  # raises ValueError on a malformed port
    except ValueError:
        parts, host = None, None
    if parts is None or parts.scheme != "https" or not host:
        raise CertsInputError(f"invalid server URL {server!r}: expected https://HOST[:PORT]")
    return host


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
