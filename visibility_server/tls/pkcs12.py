"""A client certificate as PKCS#12, for browsers (docs/dashboard.md).

Browsers import client certificates as PKCS#12 files. The embedded server's state
folder holds the admin's certificate and key (and those minted by `certs client`) as
PEM; this packs one pair, with the CA, into `<name>.p12` beside it. The file is
encrypted with the legacy PBES1/3DES and SHA-1 MAC, the only scheme every browser
and operating-system keystore still imports; it is written with the key's own
permissions (owner only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import pkcs12

from visibility_server.certs import SECRET_MODE, CertsInputError, write_atomic
from visibility_server.tls.state import StatePaths

DEFAULT_P12_PASSWORD: Final = "queuescope"


def write_pkcs12(state_dir: Path, user: str, password: bytes) -> Path:
    """Pack `user`'s certificate and key (the admin's when `user` is empty) with the CA
    into a PKCS#12 file next to them; return its path."""
    paths = StatePaths(state_dir)
    if user:
        cert_path, key_path = paths.user_cert(user), paths.user_key(user)
        out = paths.users_dir / f"{user}.p12"
    else:
        cert_path, key_path = paths.admin_cert, paths.admin_key
        out = state_dir / "admin.p12"
    if not cert_path.exists() or not key_path.exists():
        hint = (
            f"mint it first with `queuescope certs client --state-dir {state_dir} --user {user}`"
            if user
            else "`queuescope serve --embedded` creates it on first start"
        )
        raise CertsInputError(f"no certificate at {cert_path}: {hint}")
    if not password:
        raise CertsInputError("a PKCS#12 file needs a password: browsers refuse empty ones")
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    if not isinstance(
        key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
    ):
        raise CertsInputError(f"{key_path}: unsupported key type")
    cas = [x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())]
    encryption = (
        serialization.PrivateFormat.PKCS12.encryption_builder()
        .kdf_rounds(50_000)
        .key_cert_algorithm(pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC)
        .hmac_hash(hashes.SHA1())
        .build(password)
    )
    name = (user or "admin").encode()
    data = pkcs12.serialize_key_and_certificates(name, key, cert, cas, encryption)
    write_atomic(out, data, mode=SECRET_MODE)
    return out
