"""Writing and reading certificate files.

Every write is atomic (a temporary file in the same folder, then a rename): the server's
reloader polls these files and must never read half of one, and a crash mid-write must not
leave a truncated key behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import overload

from cryptography import x509

from visibility_server.tls.authority import (
    CertifiedKey,
    PrivateKey,
    load_private_key,
    public_keys_equal,
)
from visibility_server.tls.errors import CertsError

SECRET_MODE = 0o600  # private keys and anything embedding one (kubeconfigs)
PUBLIC_MODE = 0o644  # certificates and the caBundle patch
DIR_MODE = 0o700  # folders holding private keys


def write_atomic(path: Path, data: bytes, *, mode: int) -> None:
    """Replace `path` with `data` in one step; the file never exists with another mode."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # fchmod, not umask: the mode must not depend on the caller's environment.
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def write_certified_key(pair: CertifiedKey, cert_path: Path, key_path: Path) -> None:
    # Key first: a reader that catches the moment between the two renames sees a new key
    # with the old certificate, which the pair check rejects; it then retries later.
    write_atomic(key_path, pair.key_pem, mode=SECRET_MODE)
    write_atomic(cert_path, pair.cert_pem, mode=PUBLIC_MODE)


def make_private_dir(path: Path) -> None:
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)


def remove_if_present(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def read_certificates(path: Path) -> list[x509.Certificate]:
    """Every certificate of a PEM file; CertsError naming the file otherwise."""
    data = _read(path)
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError as err:
        raise CertsError(f"{path}: not a PEM certificate file ({err})") from None


def read_certificate(path: Path) -> x509.Certificate:
    return read_certificates(path)[0]


def read_private_key(path: Path) -> PrivateKey:
    data = _read(path)
    try:
        return load_private_key(data)
    except (ValueError, TypeError):
        # The parser's message is not repeated: it could quote part of the key.
        raise CertsError(f"{path}: not an unencrypted PEM ECDSA P-256 or RSA private key") from None


def read_certified_key(cert_path: Path, key_path: Path) -> CertifiedKey:
    pair = CertifiedKey(read_certificate(cert_path), read_private_key(key_path))
    if not public_keys_equal(pair.cert.public_key(), pair.key.public_key()):
        raise CertsError(f"{key_path} is not the private key of {cert_path}")
    return pair


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """Serialise writers of one folder (two `serve` processes starting at once, or
    `certs client` next to a starting server), so neither reads the other's half-made set."""
    with open(folder / ".lock", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise CertsError(f"{path}: no such file") from None
    except OSError as err:
        raise CertsError(f"{path}: {err.strerror}") from None


def _fsync_dir(folder: Path) -> None:
    # Makes the rename itself durable; not every file system allows opening a folder.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class FolderFile:
    """A file of a certificate folder, named once: on an instance it is `root / name`.

    The folders (:class:`CertFolder` and its subclasses) are tables of file names; this keeps
    each entry one line instead of a property per file."""

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, folder: None, owner: type[CertFolder]) -> FolderFile: ...
    @overload
    def __get__(self, folder: CertFolder, owner: type[CertFolder]) -> Path: ...
    def __get__(self, folder: CertFolder | None, owner: type[CertFolder]) -> FolderFile | Path:
        return self if folder is None else folder.root / self.name


@dataclass(frozen=True)
class CertFolder:
    """The files every certificate folder has: the CA pair and the serving pair."""

    root: Path

    ca_cert = FolderFile("ca.crt")
    ca_key = FolderFile("ca.key")
    tls_cert = FolderFile("tls.crt")
    tls_key = FolderFile("tls.key")
