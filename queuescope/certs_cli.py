"""`queuescope certs`: the CA, serving certificates and caBundle patch of a cluster install,
their rotation and verification (docs/cluster.md#tls-and-certificates), and client certificates for
the embedded server (docs/product.md, docs/cluster.md#embedded-mode).

Exit codes: 0 done, 2 unusable input (one message on stderr), 1 the operation failed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography import x509

from queuescope.kubeclient import KubeClient
from scheduler.kubeapi.errors import KubeError
from visibility_server import certs
from visibility_server.kube.apiservices import (
    ApiServiceReadError,
    read_apiservices,
    read_webhook_configurations,
)
from visibility_server.kube.transport import RestTransport
from visibility_server.tls.files import read_certificate
from visibility_server.tls.pkcs12 import DEFAULT_P12_PASSWORD, write_pkcs12
from visibility_server.webhooks.registrations import WEBHOOK_CONFIGURATIONS

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

_DESCRIPTION = """\
Certificates of the visibility server.

For a cluster install: `generate` writes a CA, a serving certificate for the Service and
apiservice-cabundle.yaml (a kustomize patch setting spec.caBundle on both visibility
APIServices); `rotate` replaces the serving certificate from the same CA; `rotate-ca
begin|finish` replaces the CA without a moment where kube-apiserver distrusts the server;
`verify` checks a folder and, with --kubeconfig, that the live APIServices and admission
webhooks trust it.

For the embedded server: `client` mints a client certificate and kubeconfig from the
state folder's CA (user = --user, groups = each --group); `browser` packs the admin's
(or a minted user's) certificate and key into a PKCS#12 file to import into a browser
for the dashboard.

Exit codes: 0 done, 1 the operation failed, 2 unusable input."""


def add_certs_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `certs` and its commands to the `queuescope` parser."""
    parser = subparsers.add_parser(
        "certs",
        help="make, rotate and verify the visibility server's certificates",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="certs_command", required=True, metavar="COMMAND")

    generate = commands.add_parser(
        "generate",
        help="a new CA, serving certificate and caBundle patch for a Service",
        description="Write ca.crt, ca.key (never applied to the cluster), tls.crt, tls.key "
        "and apiservice-cabundle.yaml (a kustomize patch setting spec.caBundle on both "
        "visibility APIServices).",
    )
    generate.add_argument("--namespace", default=certs.DEFAULT_NAMESPACE, help="Service namespace")
    generate.add_argument("--service", default=certs.DEFAULT_SERVICE, help="Service name")
    generate.add_argument("--out", required=True, type=Path, metavar="DIR", dest="directory")
    _key_type_option(generate, default=certs.DEFAULT_KEY_TYPE, what="the CA and serving keys")
    generate.add_argument(
        "--force", action="store_true", help="replace certificates already in DIR"
    )

    rotate = commands.add_parser(
        "rotate",
        help="a new serving key and certificate from the existing CA (caBundle unchanged)",
    )
    _dir_option(rotate)
    _key_type_option(rotate, default=None, what="the serving key (default: as before)")
    rotate.add_argument("--namespace", help="Service namespace (default: from tls.crt)")
    rotate.add_argument("--service", help="Service name (default: from tls.crt)")

    rotate_ca = commands.add_parser(
        "rotate-ca",
        help="replace the CA without an untrusted moment: begin, roll out, finish",
        description="begin: a new CA in ca.crt (the old one kept as ca-previous.*), the "
        "patch trusts both, tls.crt unchanged. finish: tls.crt from the new CA (unless "
        "`certs rotate` already made one), the patch trusts the new CA only, ca-previous.* "
        "deleted.",
    )
    rotate_ca.add_argument("phase", choices=("begin", "finish"))
    _dir_option(rotate_ca)
    _key_type_option(rotate_ca, default=None, what="new keys (default: as before)")

    verify = commands.add_parser(
        "verify",
        help="check SANs, EKU, key match, expiry, the chain and the caBundle patch",
    )
    _dir_option(verify)
    verify.add_argument("--namespace", default=certs.DEFAULT_NAMESPACE, help="Service namespace")
    verify.add_argument("--service", default=certs.DEFAULT_SERVICE, help="Service name")
    verify.add_argument(
        "--kubeconfig",
        type=Path,
        metavar="FILE",
        help="also read both APIServices with this kubeconfig and check that each "
        "exists, names the Service, has no insecureSkipTLSVerify and a caBundle that "
        "validates tls.crt",
    )

    client = commands.add_parser(
        "client",
        help="a client certificate and kubeconfig from the embedded state folder's CA",
        description="Write DIR/users/NAME.crt, NAME.key and NAME.kubeconfig (user = NAME, "
        "groups = each --group) and print the kubeconfig's path.",
    )
    client.add_argument(
        "--state-dir", type=Path, default=certs.DEFAULT_STATE_DIR, metavar="DIR", dest="state_dir"
    )
    client.add_argument("--user", required=True, metavar="NAME")
    client.add_argument(
        "--group", action="append", default=[], metavar="G", dest="groups", help="repeatable"
    )
    _key_type_option(client, default=certs.DEFAULT_KEY_TYPE, what="the client key")

    browser = commands.add_parser(
        "browser",
        help="a PKCS#12 file of a client certificate, to import into a browser",
        description="Write DIR/admin.p12 (or DIR/users/NAME.p12 for a user minted with "
        "`certs client`), protected by --password, and print its path. Import it into the "
        "browser's personal certificates to open the dashboard of `serve --embedded`.",
    )
    browser.add_argument(
        "--state-dir", type=Path, default=certs.DEFAULT_STATE_DIR, metavar="DIR", dest="state_dir"
    )
    browser.add_argument("--user", default="", metavar="NAME", help="default: the admin")
    browser.add_argument(
        "--password",
        default=DEFAULT_P12_PASSWORD,
        help=f"import password (default {DEFAULT_P12_PASSWORD!r}; some browsers refuse none)",
    )


def run_certs(args: argparse.Namespace, *, now: datetime | None = None) -> int:
    """Run the `certs` command parsed into `args`; `now` is for tests."""
    handler = _HANDLERS.get(args.certs_command)
    if handler is None:
        print(f"error: unknown certs command {args.certs_command!r}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return handler(args, now or datetime.now(UTC))
    except certs.CertsInputError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except (certs.CertsError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILURE


def _generate(args: argparse.Namespace, now: datetime) -> int:
    cert_dir = certs.generate_cert_dir(
        args.directory,
        service=_service(args),
        now=now,
        key_type=args.key_type,
        force=args.force,
    )
    _print_written(cert_dir)
    print(f"serving certificate for DNS:{certs.required_service_san(args.namespace, args.service)}")
    print(f"keep {cert_dir.ca_key} private: it is never applied to the cluster")
    return EXIT_OK


def _rotate(args: argparse.Namespace, now: datetime) -> int:
    serving = certs.rotate_serving_cert(
        args.directory,
        now=now,
        namespace=args.namespace,
        service=args.service,
        key_type=args.key_type,
    )
    cert_dir = certs.CertDir(args.directory)
    print(f"wrote {cert_dir.tls_cert}, {cert_dir.tls_key} (serial {serving.cert.serial_number:x})")
    print("caBundle unchanged: update the Secret; replicas reload it without a restart")
    return EXIT_OK


def _rotate_ca(args: argparse.Namespace, now: datetime) -> int:
    cert_dir = certs.CertDir(args.directory)
    if args.phase == "begin":
        certs.begin_ca_rotation(args.directory, now=now, key_type=args.key_type)
        print(f"wrote the new CA to {cert_dir.ca_cert}; the old one is {cert_dir.previous_ca_cert}")
        print(f"{cert_dir.ca_bundle_patch} now trusts both CAs; tls.crt is unchanged")
        print(
            "next: apply the patch, then `certs rotate` and roll out the Secret, "
            "then `certs rotate-ca finish`"
        )
        return EXIT_OK
    reissued = certs.finish_ca_rotation(args.directory, now=now, key_type=args.key_type)
    print(f"{cert_dir.ca_bundle_patch} now trusts the new CA only; ca-previous.* deleted")
    if reissued:
        print(f"wrote {cert_dir.tls_cert}, {cert_dir.tls_key} from the new CA")
        print(
            "next: roll out the Secret and wait until every replica serves it "
            "(queuescope_serving_cert_not_after_seconds) BEFORE applying the patch"
        )
    else:
        print("tls.crt was already from the new CA: apply the patch once it is rolled out")
    return EXIT_OK


def _verify(args: argparse.Namespace, now: datetime) -> int:
    cert_dir = certs.CertDir(args.directory)
    found = certs.verify_cert_dir(args.directory, now=now, service=_service(args))
    if args.kubeconfig is not None:
        found.extend(_live_findings(args, cert_dir, now))
    for warning in found.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for error in found.errors:
        print(f"error: {error}", file=sys.stderr)
    if not found.ok:
        return EXIT_FAILURE
    serving = x509.load_pem_x509_certificate(cert_dir.tls_cert.read_bytes())
    print(
        f"ok: {cert_dir.tls_cert} is valid for "
        f"DNS:{certs.required_service_san(args.namespace, args.service)} until "
        f"{serving.not_valid_after_utc:%Y-%m-%dT%H:%M:%SZ}"
    )
    if args.kubeconfig is not None:
        print(f"ok: the caBundle of {' and '.join(certs.APISERVICE_NAMES)} trusts it")
    return EXIT_OK


def _live_findings(
    args: argparse.Namespace, cert_dir: certs.CertDir, now: datetime
) -> certs.Findings:
    if not args.kubeconfig.is_file():
        raise certs.CertsInputError(f"{args.kubeconfig}: no such file")
    try:
        leaf = read_certificate(cert_dir.tls_cert)
    except certs.CertsError:
        # verify_cert_dir reported it; nothing to compare the bundles with
        return certs.Findings()
    apiservices, webhooks = asyncio.run(_read_live(args.kubeconfig))
    found = certs.check_live_apiservices(leaf, apiservices, now=now, service=_service(args))
    if isinstance(webhooks, str):
        found.warnings.append(webhooks)
    else:
        found.extend(certs.check_live_webhooks(leaf, webhooks, now=now, service=_service(args)))
    return found


Live = dict[str, dict[str, Any] | None]


async def _read_live(kubeconfig: Path) -> tuple[Live, Live | str]:
    """The APIServices, and the webhook configurations (or why they could not be read:
    a user may read the one and not the other)."""
    from kubernetes_asyncio.config import ConfigException  # noqa: PLC0415 (see kubeclient.py)

    kube = KubeClient(str(kubeconfig))
    try:
        try:
            await kube.open()
        except (ConfigException, ValueError) as err:
            raise certs.CertsInputError(f"{kubeconfig}: not a usable kubeconfig ({err})") from None
        assert kube.rest is not None  # opened above
        transport = RestTransport(kube.rest)
        apiservices = await read_apiservices(transport, certs.APISERVICE_NAMES)
        configurations = [(kind, name) for kind, name, _ in WEBHOOK_CONFIGURATIONS]
        try:
            webhooks: Live | str = await read_webhook_configurations(transport, configurations)
        except ApiServiceReadError as err:
            webhooks = f"the admission webhooks' caBundle was not checked: {err}"
        return apiservices, webhooks
    except KubeError as err:
        raise certs.CertsError(err.detail) from None
    except ApiServiceReadError as err:
        raise certs.CertsError(str(err)) from None
    finally:
        await kube.close()


def _client(args: argparse.Namespace, now: datetime) -> int:
    path = certs.mint_client(
        args.state_dir, args.user, args.groups, now=now, key_type=args.key_type
    )
    # Only the path on stdout, so that `export KUBECONFIG=$(queuescope certs client …)` works.
    print(path)
    return EXIT_OK


def _browser(args: argparse.Namespace, now: datetime) -> int:
    del now  # the certificate is packed as it is
    path = write_pkcs12(args.state_dir, args.user, args.password.encode())
    print(path)
    return EXIT_OK


_HANDLERS: dict[str, Callable[[argparse.Namespace, datetime], int]] = {
    "generate": _generate,
    "rotate": _rotate,
    "rotate-ca": _rotate_ca,
    "verify": _verify,
    "client": _client,
    "browser": _browser,
}


def _dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", required=True, type=Path, metavar="DIR", dest="directory")


def _key_type_option(
    parser: argparse.ArgumentParser, *, default: certs.KeyType | None, what: str
) -> None:
    parser.add_argument(
        "--key-type", choices=certs.KEY_TYPES, default=default, help=f"key type of {what}"
    )


def _print_written(cert_dir: certs.CertDir) -> None:
    for path in (
        cert_dir.ca_cert,
        cert_dir.ca_key,
        cert_dir.tls_cert,
        cert_dir.tls_key,
        cert_dir.ca_bundle_patch,
    ):
        print(f"wrote {path}")


def _service(args: argparse.Namespace) -> certs.ServiceName:
    return certs.ServiceName(args.namespace, args.service)
