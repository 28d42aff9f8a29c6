"""The cluster's certificates and keys: a CA, the serving certificate, the admin client
certificate, the front-proxy CA with its client certificate, and the service-account signing key.

On first start nothing exists and everything is generated, so that
``kubectl --kubeconfig var/admin.kubeconfig`` works at once.  On later starts
the files are reused; a certificate is re-issued only when kapiserver issued it
(see :meth:`_Issuer.issued_here`) and it expired (or soon will), was not issued
by the current CA or, for the serving certificate, lacks or has other subject
alternative names than wanted.  Keys are written with mode 0600.

The serving certificate names what kube-apiserver's self-signed one names
(``MaybeDefaultWithSelfSignedCerts`` with the addresses of
``getServiceIPAndRanges``): the advertise address, the ``kubernetes`` Service's
cluster IP (the first address of ``service_cluster_ip_range``), the bind address
(``localhost`` when it is unspecified), ``kubernetes``, ``kubernetes.default``
and ``kubernetes.default.svc``; and also ``kubernetes.default.svc.cluster.local``
(as kubeadm's, for the cluster domain node components default to), loopback
(the admin kubeconfig names 127.0.0.1) and ``tls.extra_sans``.  Pods reach the
server through the Service by these names and that IP.

Files in ``cert_dir``: ``ca.crt``/``ca.key``, ``apiserver.crt``/``apiserver.key``,
``admin.crt``/``admin.key``, ``front-proxy-ca.crt``/``.key`` and
``front-proxy-client.crt``/``.key`` (kubeadm's names: the client certificate an
aggregating server presents to extension servers, ``CN=front-proxy-client``),
``apiserver-kubelet-client.crt``/``.key`` (the client certificate presented to
kubelets, ``O=system:masters``, as kubeadm's),
and ``sa.key``/``sa.pub`` (RSA 2048: service-account tokens are RS256 JWTs).
An operator may put their own CA (and even their own leaf certificates) there;
without ``ca.key`` nothing is issued.  A file named in the configuration
instead of its default place in ``cert_dir`` is the operator's: never generated.

``.checked.json`` there remembers what the checks of a start found (:class:`_Checked`):
the SHA-256 of every input of a check (the certificate's and key's bytes, its CA's,
the subject and names wanted; the service-account signing key's bytes) and until when
its outcome holds (the renewal time of a certificate kapiserver issued).  A later start
with the same bytes and wishes, before that time, reuses the files unparsed (the signing
key is parsed when a token is first signed or verified), so a restart pages in none of
cryptography's x509 and key code (1.1 MiB resident, bench/README.md); any changed byte
is checked in full.
"""
from __future__ import annotations

import datetime
import functools
import hashlib
import ipaddress
import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple, Optional, Union

import cryptography
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from OpenSSL import SSL, crypto
from twisted.internet import ssl
from twisted.logger import Logger

from kapiserver.apis.core.service_ranges import IPRange
from kapiserver.auth.private_key import InvalidKeyError, load_private_key
from kapiserver.auth.serviceaccount import SigningKeyError, load_signing_key
from kapiserver.auth.x509 import load_pem_certificates
from kapiserver.machinery.private_files import make_private_dir
from kapiserver.server.advertise import advertise_address

if TYPE_CHECKING:
    from kapiserver.server.config import Config

log = Logger()

CA_NAME = "kapiserver-ca"
SERVING_NAME = "kapiserver"
ADMIN_USER = "kapiserver-admin"
ADMIN_GROUP = "system:masters"
DEFAULT_SANS = ("127.0.0.1", "::1", "localhost", "kubernetes", "kubernetes.default",
                "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")

# kubeadm's name and identity for the client certificate presented to kubelets
KUBELET_CLIENT_NAME = "apiserver-kubelet-client"
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"

FRONT_PROXY_CA_NAME = "front-proxy-ca"
FRONT_PROXY_CLIENT_NAME = "front-proxy-client"
SERVICE_ACCOUNT_KEY = "sa.key"
SERVICE_ACCOUNT_PUBLIC_KEY = "sa.pub"
SERVICE_ACCOUNT_KEY_BITS = 2048

CHECKED_FILE = ".checked.json"
SIGNING_KEY_CHECK = "service-account signing key"
CA_DAYS = 3650
LEAF_DAYS = 365
RENEW_BEFORE = datetime.timedelta(days=30)


class CredentialFiles(NamedTuple):
    """Where each authentication credential lives once the configuration's defaults are filled in.

    ``defaults`` names the ones left to their default place in ``cert_dir``:
    those are generated on first start (and a server built without them, as
    in-process tests are, runs without that kind of authentication); a file
    the operator named must exist.
    """

    client_ca: str
    requestheader_client_ca: str
    service_account_signing_key: str
    proxy_client_cert: str
    proxy_client_key: str
    kubelet_client_cert: str
    kubelet_client_key: str
    defaults: frozenset[str]


def serving_sans(config: "Config") -> list[str]:
    """The serving certificate's names besides :data:`DEFAULT_SANS`: the advertise address, the
    ``kubernetes`` Service's cluster IP, a specified bind address, then ``tls.extra_sans``."""
    names = [advertise_address(config.advertise_address, config.bind_address),
             IPRange(config.service_cluster_ip_range).first_ip]
    if not ipaddress.ip_address(config.bind_address).is_unspecified:
        names.append(config.bind_address)
    return names + list(config.tls.extra_sans)


def credential_files(config: "Config") -> CredentialFiles:
    """The completed credential paths of ``config`` (``""`` keys resolved into ``cert_dir``)."""
    authn = config.authentication
    chosen = {
        "client_ca": (authn.client_ca_file, "ca.crt"),
        "requestheader_client_ca": (authn.requestheader.client_ca_file, FRONT_PROXY_CA_NAME + ".crt"),
        "service_account_signing_key": (authn.service_account.signing_key_file, SERVICE_ACCOUNT_KEY),
        "proxy_client_cert": (config.proxy_client_cert_file, FRONT_PROXY_CLIENT_NAME + ".crt"),
        "proxy_client_key": (config.proxy_client_key_file, FRONT_PROXY_CLIENT_NAME + ".key"),
        "kubelet_client_cert": (config.kubelet.client_certificate, KUBELET_CLIENT_NAME + ".crt"),
        "kubelet_client_key": (config.kubelet.client_key, KUBELET_CLIENT_NAME + ".key"),
    }
    paths = {name: value or os.path.join(config.cert_dir, default) for name, (value, default) in chosen.items()}
    return CredentialFiles(**paths, defaults=frozenset(name for name, (value, _) in chosen.items() if not value))


class CertificateError(Exception):
    """A certificate or key cannot be read or issued; ``str()`` is one line for the operator."""


@dataclass
class CertBundle:
    """The PEM material the server needs, and where it lives."""

    cert_dir: str
    ca_cert_pem: bytes
    serving_cert_pem: bytes
    serving_key_pem: bytes
    admin_cert_pem: bytes
    admin_key_pem: bytes
    # the front-proxy CA (b"" when the configuration names its own)
    front_proxy_ca_pem: bytes = b""

    def path(self, name: str) -> str:
        return os.path.join(self.cert_dir, name)


Key = ec.EllipticCurvePrivateKey
SAN = Union[x509.DNSName, x509.IPAddress]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _new_key() -> Key:
    # P-256: fast to generate, accepted by Go (kubectl), OpenSSL and urllib3 clients.
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: Key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def parse_sans(names: Iterable[str]) -> list[SAN]:
    """Turn host names and IP literals into SAN entries (IPs as IP SANs)."""
    out: list[SAN] = []
    for name in names:
        try:
            entry: SAN = x509.IPAddress(ipaddress.ip_address(name))
        except ValueError:
            entry = x509.DNSName(name)
        if entry not in out:
            out.append(entry)
    return out


def _san_key(entries: Iterable[SAN]) -> set:
    return {(type(e).__name__, str(e.value).lower()) for e in entries}


def _builder(subject: x509.Name, issuer: x509.Name, public_key, days: int) -> x509.CertificateBuilder:
    now = _now()
    return (x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=days)))


def _make_ca(common_name: str = CA_NAME) -> tuple[x509.Certificate, Key]:
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (_builder(name, name, key.public_key(), CA_DAYS)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def _make_leaf(ca_cert: x509.Certificate, ca_key: Key, subject: x509.Name, usage: x509.ObjectIdentifier,
               sans: Optional[list[SAN]] = None) -> tuple[x509.Certificate, Key]:
    key = _new_key()
    builder = (_builder(subject, ca_cert.subject, key.public_key(), LEAF_DAYS)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                              critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


def _write(path: str, data: bytes, private: bool) -> None:
    """Write atomically; private files are created 0600 from the start."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600 if private else 0o644)
    os.replace(tmp, path)


def _read(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CertificateError(f"{path}: cannot read: {e.strerror}") from None


def _load_cert(path: str, data: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(data)
    except ValueError:
        raise CertificateError(f"{path}: not a PEM certificate") from None


def _load_key(path: str, data: bytes):
    try:
        return load_private_key(data)
    except InvalidKeyError as e:
        raise CertificateError(f"{path}: {e}") from None
    except (ValueError, TypeError):
        raise CertificateError(f"{path}: not an unencrypted PEM private key") from None


def _check_pair(cert_path: str, cert: x509.Certificate, key) -> None:
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if cert.public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki):
        raise CertificateError(f"{cert_path}: certificate does not match its private key")


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
        return True
    except (ValueError, TypeError, Exception):
        return False


def _sans_of(cert: x509.Certificate) -> list[SAN]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return list(ext.value)


class _Checked:
    """The checks an earlier start made and passed, in ``cert_dir/.checked.json``: the SHA-256
    of a check's inputs, and the time (seconds since the epoch) until which its outcome holds
    (null: for good, as for a certificate used as it is).

    The file lives with the keys, written by whoever may write them: it vouches for nothing
    the files' bytes do not.  Unreadable or malformed, it is an empty record (everything is
    checked); it keeps only what this start checked or reused.
    """

    def __init__(self, cert_dir: str) -> None:
        self.path = os.path.join(cert_dir, CHECKED_FILE)
        try:
            loaded = json.loads(_read(self.path) or b"{}")
        except (ValueError, CertificateError):
            loaded = {}
        self.earlier: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
        self.now: dict[str, Optional[float]] = {}

    @staticmethod
    def digest(*inputs: Union[bytes, str]) -> str:
        """The SHA-256 of a check's inputs, and of the version of the parser that checked them."""
        h = hashlib.sha256()
        inputs = (cryptography.__version__,) + inputs
        for value in inputs:
            data = value.encode() if isinstance(value, str) else value
            h.update(len(data).to_bytes(8, "big") + data)
        return h.hexdigest()

    def passed(self, digest: str) -> bool:
        """Whether a check of these inputs passed before, and its outcome still holds."""
        until = self.earlier.get(digest, False)
        if until is None or (isinstance(until, (int, float)) and not isinstance(until, bool)
                             and _now().timestamp() < until):
            self.now[digest] = until
            return True
        return False

    def record(self, digest: str, until: Optional[datetime.datetime] = None) -> None:
        self.now[digest] = until.timestamp() if until is not None else None

    def save(self) -> None:
        """Write the record if it changed; a directory that cannot take it (read-only, as an
        operator's may be) costs the next start its checks, nothing else."""
        if self.now == self.earlier:
            return
        try:
            _write(self.path, json.dumps(self.now, indent=1, sort_keys=True).encode() + b"\n", private=True)
        except OSError as e:
            log.info("Not recording the certificates' checks in {path}: {error}", path=self.path,
                     error=e.strerror or e)


class SigningCA:
    """A CA's certificate and key, parsed when first used (a restart that signs nothing parses
    neither: the checks an earlier start passed are recorded, :class:`_Checked`).  ``key_pem`` is
    None for a CA whose key is not here (an operator's: nothing is issued from it); ``parsed``
    gives the objects of a CA just made."""

    def __init__(self, cert_path: str, cert_pem: bytes, key_path: str, key_pem: Optional[bytes],
                 parsed: Optional[tuple[x509.Certificate, Any]] = None) -> None:
        self.cert_path, self.cert_pem, self.key_path, self.key_pem = cert_path, cert_pem, key_path, key_pem
        self._certificate: Optional[x509.Certificate] = parsed[0] if parsed is not None else None
        self._key: Optional[Any] = parsed[1] if parsed is not None else None

    @property
    def certificate(self) -> x509.Certificate:
        if self._certificate is None:
            self._certificate = _load_cert(self.cert_path, self.cert_pem)
        return self._certificate

    @property
    def key(self) -> Any:
        assert self.key_pem is not None
        if self._key is None:
            self._key = _load_key(self.key_path, self.key_pem)
        return self._key


class _Issuer:
    """Loads or creates the CA and issues leaf certificates from it when needed; the CA's
    certificate and key are parsed only when a check or an issue needs them."""

    def __init__(self, cert_dir: str, checked: _Checked, base: str = "ca", common_name: str = CA_NAME) -> None:
        self.cert_dir = cert_dir
        self.checked = checked
        self.ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self.ca_path = os.path.join(cert_dir, base + ".crt")
        self.ca_key_path = os.path.join(cert_dir, base + ".key")
        ca_pem, key_pem = _read(self.ca_path), _read(self.ca_key_path)
        if ca_pem is None and key_pem is None:
            log.info("Generating a new {name} in {dir}", name=common_name, dir=cert_dir)
            made = _make_ca(common_name)
            key_pem, ca_pem = _key_pem(made[1]), _cert_pem(made[0])
            _write(self.ca_key_path, key_pem, private=True)
            _write(self.ca_path, ca_pem, private=False)
            self.ca = SigningCA(self.ca_path, ca_pem, self.ca_key_path, key_pem, made)
        elif ca_pem is None:
            raise CertificateError(f"{self.ca_path}: missing (but {self.ca_key_path} exists)")
        else:
            self.ca = SigningCA(self.ca_path, ca_pem, self.ca_key_path, key_pem)
        digest = checked.digest("ca", ca_pem, key_pem or b"")  # as load_signing_ca's
        if not checked.passed(digest):
            cert = self.ca_cert  # (a malformed one is refused here)
            if self.can_issue:
                _check_pair(self.ca_path, cert, self.ca_key)
            checked.record(digest)

    @property
    def ca_pem(self) -> bytes:
        return self.ca.cert_pem

    @property
    def ca_key_pem(self) -> Optional[bytes]:
        return self.ca.key_pem

    @property
    def can_issue(self) -> bool:
        """Whether the CA's key is here."""
        return self.ca.key_pem is not None

    @property
    def ca_cert(self) -> x509.Certificate:
        return self.ca.certificate

    @property
    def ca_key(self) -> Any:
        return self.ca.key

    def issued_here(self, cert: x509.Certificate, subject: x509.Name) -> bool:
        """Whether ``cert`` is one kapiserver issued for this file, and so may issue again.

        kapiserver's certificates carry exactly the subject it gives the file (``CN=kapiserver``
        for the serving one) and an issuer named as the CA it generates (``CN=kapiserver-ca``),
        whether or not that CA is still the current one.  A certificate the operator put there
        has their own subject or issuer: it is used as it is, never replaced, even when it lacks
        names kapiserver would add (as kube-apiserver uses a given --tls-cert-file).
        """
        return cert.subject == subject and cert.issuer == self.ca_name

    def leaf(self, base: str, subject: x509.Name, usage: x509.ObjectIdentifier,
             sans: Optional[list[SAN]] = None) -> tuple[bytes, bytes]:
        """Reuse ``<base>.crt``/``<base>.key`` if still right, else issue a new pair."""
        cert_path = os.path.join(self.cert_dir, base + ".crt")
        key_path = os.path.join(self.cert_dir, base + ".key")
        cert_pem, key_pem = _read(cert_path), _read(key_path)
        why = ""
        if cert_pem is None or key_pem is None:
            if (cert_pem is None) != (key_pem is None):
                missing = cert_path if cert_pem is None else key_path
                if not self.can_issue:
                    raise CertificateError(f"{missing}: missing, and no ca.key to issue a new one")
            why = "missing"
        else:
            digest = self._leaf_digest(cert_pem, key_pem, subject, sans)
            if self.checked.passed(digest):
                return cert_pem, key_pem
            cert = _load_cert(cert_path, cert_pem)
            _check_pair(cert_path, cert, _load_key(key_path, key_pem))
            if not self.can_issue or not self.issued_here(cert, subject):
                self.checked.record(digest)
                return cert_pem, key_pem  # operator-managed: use as is
            if not _issued_by(cert, self.ca_cert):
                why = "not issued by the current CA"
            elif cert.not_valid_after_utc - RENEW_BEFORE < _now():
                why = "expiring"
            elif sans is not None and _san_key(_sans_of(cert)) != _san_key(sans):
                why = "subject alternative names changed"
            if not why:
                self.checked.record(digest, cert.not_valid_after_utc - RENEW_BEFORE)
                return cert_pem, key_pem
        if not self.can_issue:
            raise CertificateError(f"{cert_path}: missing, and no ca.key to issue a new one")
        log.info("Issuing {path} ({why})", path=cert_path, why=why)
        cert, key = _make_leaf(self.ca_cert, self.ca_key, subject, usage, sans)
        cert_pem, key_pem = _cert_pem(cert), _key_pem(key)
        _write(key_path, key_pem, private=True)
        _write(cert_path, cert_pem, private=False)
        self.checked.record(self._leaf_digest(cert_pem, key_pem, subject, sans),
                            cert.not_valid_after_utc - RENEW_BEFORE)
        return cert_pem, key_pem

    def _leaf_digest(self, cert_pem: bytes, key_pem: bytes, subject: x509.Name, sans: Optional[list[SAN]]) -> str:
        """The inputs of :meth:`leaf`'s checks: the pair, the CA's files, and what is wanted."""
        wanted = json.dumps(sorted(_san_key(sans))) if sans is not None else ""
        return self.checked.digest("leaf", cert_pem, key_pem, self.ca_pem, self.ca_key_pem or b"",
                                   subject.rfc4514_string(), self.ca_name.rfc4514_string(), wanted)


def ensure_certificates(cert_dir: str, extra_sans: Iterable[str] = (), *, front_proxy: bool = True,
                        front_proxy_client: bool = True, service_account_key: bool = True,
                        kubelet_client: bool = True, signing_key_file: str = "") -> CertBundle:
    """Load the certificates from ``cert_dir``, creating or renewing what is missing or stale.

    ``front_proxy``, ``front_proxy_client``, ``service_account_key`` and
    ``kubelet_client`` say whether the front-proxy CA, its client certificate,
    the service-account key and the kubelet client certificate live in ``cert_dir`` (the defaults) and so are made here when missing.
    The service-account signing key (``signing_key_file``, by default ``sa.key`` when
    ``service_account_key``) is checked and its check recorded, for authentication to
    parse it when first used (:func:`checked_before`).
    Blocking (file I/O, key generation): call it before the reactor runs or
    from a thread.  Raises :class:`CertificateError` with a one-line message.
    """
    try:
        make_private_dir(cert_dir)  # and its missing parents, 0700 whatever the umask
    except OSError as e:
        raise CertificateError(f"{cert_dir}: cannot create certificate directory: {e.strerror}") from None
    try:
        checked = _Checked(cert_dir)
        issuer = _Issuer(cert_dir, checked)
        sans = parse_sans(list(DEFAULT_SANS) + list(extra_sans))
        serving_cert, serving_key = issuer.leaf(
            "apiserver", x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVING_NAME)]),
            ExtendedKeyUsageOID.SERVER_AUTH, sans)
        admin_cert, admin_key = issuer.leaf(
            "admin", x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ADMIN_GROUP),
                                x509.NameAttribute(NameOID.COMMON_NAME, ADMIN_USER)]),
            ExtendedKeyUsageOID.CLIENT_AUTH)
        if kubelet_client and issuer.can_issue:
            issuer.leaf(KUBELET_CLIENT_NAME,
                        x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, ADMIN_GROUP),
                                   x509.NameAttribute(NameOID.COMMON_NAME, KUBELET_CLIENT_USER)]),
                        ExtendedKeyUsageOID.CLIENT_AUTH)
        front_proxy_ca_pem = b""
        if front_proxy or front_proxy_client:
            proxy_issuer = _Issuer(cert_dir, checked, FRONT_PROXY_CA_NAME, FRONT_PROXY_CA_NAME)
            front_proxy_ca_pem = proxy_issuer.ca_pem if front_proxy else b""
            if front_proxy_client:
                proxy_issuer.leaf(FRONT_PROXY_CLIENT_NAME,
                                  x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, FRONT_PROXY_CLIENT_NAME)]),
                                  ExtendedKeyUsageOID.CLIENT_AUTH)
        if service_account_key:
            _ensure_service_account_key(cert_dir)
        if signing_key_file or service_account_key:
            _check_signing_key(signing_key_file or os.path.join(cert_dir, SERVICE_ACCOUNT_KEY), checked)
        checked.save()
    except OSError as e:
        raise CertificateError(f"{e.filename or cert_dir}: {e.strerror or e}") from None
    return CertBundle(cert_dir, issuer.ca_pem, serving_cert, serving_key, admin_cert, admin_key, front_proxy_ca_pem)


def _ensure_service_account_key(cert_dir: str) -> None:
    """``sa.key`` (and its public half ``sa.pub``), made once: every token ever issued depends on it."""
    key_path = os.path.join(cert_dir, SERVICE_ACCOUNT_KEY)
    pub_path = os.path.join(cert_dir, SERVICE_ACCOUNT_PUBLIC_KEY)
    key_pem = _read(key_path)
    if key_pem is None:
        log.info("Generating the service-account signing key {path}", path=key_path)
        key = rsa.generate_private_key(public_exponent=65537, key_size=SERVICE_ACCOUNT_KEY_BITS)
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        _write(key_path, key_pem, private=True)
        public_key = key.public_key()  # the key just made: no need to read it back
    elif _read(pub_path) is not None:
        return
    else:  # sa.pub is missing: derive it from the key again
        public_key = _load_key(key_path, key_pem).public_key()
    public_pem = public_key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    _write(pub_path, public_pem, private=False)


def _check_signing_key(path: str, checked: _Checked) -> None:
    """Record that the service-account signing key at ``path`` passes its checks (one that does
    not, or is missing, is not recorded: authentication refuses it, saying why)."""
    pem = _read(path)
    if pem is None:
        return
    digest = checked.digest(SIGNING_KEY_CHECK, pem)
    if checked.passed(digest):
        return
    try:
        load_signing_key(pem)
    except SigningKeyError:
        return
    checked.record(digest)


def checked_before(cert_dir: str, *inputs: Union[bytes, str]) -> bool:
    """Whether a start recorded in ``cert_dir/.checked.json`` that a check of ``inputs`` passed."""
    return _Checked(cert_dir).passed(_Checked.digest(*inputs))


def issue_client_certificate(cert_dir: str, user: str, groups: Iterable[str] = (),
                             ca: str = "ca") -> tuple[bytes, bytes]:
    """Issue a client certificate for ``user`` from the cluster CA, or the CA ``<ca>.crt``/``.key``
    of ``cert_dir`` (``front-proxy-ca``) (tests, extra kubeconfigs)."""
    ca_path, key_path = os.path.join(cert_dir, ca + ".crt"), os.path.join(cert_dir, ca + ".key")
    ca_pem, key_pem = _read(ca_path), _read(key_path)
    if ca_pem is None or key_pem is None:
        raise CertificateError(f"{cert_dir}: no CA to issue client certificates from")
    ca_cert, ca_key = _load_cert(ca_path, ca_pem), _load_key(key_path, key_pem)
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    if user:  # "": a certificate without a Common Name
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    cert, key = _make_leaf(ca_cert, ca_key, x509.Name(attrs), ExtendedKeyUsageOID.CLIENT_AUTH)
    return _cert_pem(cert), _key_pem(key)


def serving_context_factory(bundle: CertBundle, client_cas_pem: Optional[bytes] = None) -> ssl.CertificateOptions:
    """TLS options for the listener: our serving certificate, ALPN h2 + http/1.1,
    and client certificates requested (not required) and verified against
    ``client_cas_pem`` (every CA a client certificate may chain to: the client CA
    bundle and the front-proxy CA; the cluster CA by default).  Which of them
    a certificate chains to decides what it may do: the authenticators check."""
    try:
        key = crypto.load_privatekey(crypto.FILETYPE_PEM, bundle.serving_key_pem)
        cert = crypto.load_certificate(crypto.FILETYPE_PEM, bundle.serving_cert_pem)
        cas = load_pem_certificates(client_cas_pem or bundle.ca_cert_pem)
    except (crypto.Error, ValueError) as e:
        raise CertificateError(f"{bundle.cert_dir}: cannot load serving certificate or client CAs: {e}") from None
    options = ssl.CertificateOptions(
        privateKey=key,
        certificate=cert,
        acceptableProtocols=[b"h2", b"http/1.1"],
        raiseMinimumTo=ssl.TLSVersion.TLSv1_2,
    )
    # Twisted's options verify a peer only when a certificate is required, so
    # ask for an optional client certificate on the context itself: VERIFY_PEER
    # without FAIL_IF_NO_PEER_CERT; one that does not chain to our CA fails the handshake.
    ctx = options.getContext()
    store = ctx.get_cert_store()
    assert store is not None
    for ca in cas:
        try:
            store.add_cert(ca)
        except crypto.Error:  # the same CA twice in the bundles
            pass
    ctx.set_verify(SSL.VERIFY_PEER, _verify_callback)
    ctx.set_client_ca_list([ca.get_subject() for ca in cas])  # lets clients pick the right certificate
    return options


def _verify_callback(connection, x509_cert, errno: int, depth: int, ok: int) -> bool:
    return bool(ok)


def load_signing_ca(cert_dir: str) -> Optional[SigningCA]:
    """The cluster CA (``ca.crt``/``ca.key``) to sign CSRs with, or None when the key is not
    there (an operator-managed CA: nothing can be signed here)."""
    ca_path, key_path = os.path.join(cert_dir, "ca.crt"), os.path.join(cert_dir, "ca.key")
    ca_pem, key_pem = _read(ca_path), _read(key_path)
    if ca_pem is None or key_pem is None:
        return None
    ca = SigningCA(ca_path, ca_pem, key_path, key_pem)
    if not checked_before(cert_dir, "ca", ca_pem, key_pem):
        _check_pair(ca_path, ca.certificate, ca.key)
    return ca
