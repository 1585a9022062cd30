"""Certificates and keys for a private test cluster, made with ``cryptography`` at every start.

Everything is ECDSA P-256 (fast to make; accepted by etcd-less kube-apiserver TLS, client-certificate
authentication and service-account token signing, ES256). Validity: one day. Files are written with
mode 0600 under the given folder; nothing is reused between runs.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CertificateAuthority", "ClusterPKI", "make_pki"]

_VALIDITY = datetime.timedelta(days=1)


def _write(path: Path, data: bytes) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


@dataclass
class CertificateAuthority:
    """A self-signed CA that issues leaf certificates into ``folder``."""

    folder: Path
    stem: str
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, folder: Path, stem: str, common_name: str) -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name))
            .issuer_name(_name(common_name))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        ca = cls(folder, stem, key, cert)
        _write(ca.cert_path, cert.public_bytes(serialization.Encoding.PEM))
        _write(ca.key_path, _key_pem(key))
        return ca

    @property
    def cert_path(self) -> Path:
        return self.folder / f"{self.stem}.crt"

    @property
    def key_path(self) -> Path:
        return self.folder / f"{self.stem}.key"

    def issue(
        self,
        stem: str,
        common_name: str,
        *,
        organizations: tuple[str, ...] = (),
        server_names: tuple[str, ...] = (),
        server_ips: tuple[str, ...] = (),
        client: bool = True,
    ) -> tuple[Path, Path]:
        """A leaf certificate and key (``<stem>.crt``, ``<stem>.key``); server use when names/IPs are given."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usages = []
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        if server_names or server_ips:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organizations))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
        )
        if server_names or server_ips:
            alt: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
            alt.extend(x509.IPAddress(ipaddress.ip_address(ip)) for ip in server_ips)
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path = _write(self.folder / f"{stem}.crt", cert.public_bytes(serialization.Encoding.PEM))
        key_path = _write(self.folder / f"{stem}.key", _key_pem(key))
        return cert_path, key_path


@dataclass
class ClusterPKI:
    """Every certificate and key a private control plane needs, as file paths."""

    ca: CertificateAuthority
    front_proxy_ca: CertificateAuthority
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    apiserver_kubelet_cert: Path
    apiserver_kubelet_key: Path
    front_proxy_client_cert: Path
    front_proxy_client_key: Path
    sa_private: Path
    sa_public: Path

    @property
    def ca_cert(self) -> Path:
        return self.ca.cert_path

    @property
    def ca_key(self) -> Path:
        return self.ca.key_path

    @property
    def front_proxy_ca_cert(self) -> Path:
        return self.front_proxy_ca.cert_path

    def client(self, user: str, groups: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """A client certificate for ``user`` (CN) in ``groups`` (O), signed by the cluster CA."""
        stem = "client-" + "".join(c if c.isalnum() else "_" for c in user + "-" + "-".join(groups))
        return self.ca.issue(stem, user, organizations=groups)

    def server(self, stem: str, names: tuple[str, ...], ips: tuple[str, ...] = ("127.0.0.1",)) -> tuple[Path, Path]:
        """A serving certificate (also usable as a client one) signed by the cluster CA."""
        return self.ca.issue(stem, names[0] if names else ips[0], server_names=names, server_ips=ips)


def make_pki(folder: Path, *, service_ip: str) -> ClusterPKI:
    """Make the cluster's CAs, certificates and service-account key pair under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority.create(folder, "ca", "numaplane-test-ca")
    front = CertificateAuthority.create(folder, "front-proxy-ca", "numaplane-test-front-proxy-ca")
    serving = ca.issue(
        "apiserver",
        "kube-apiserver",
        server_names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        server_ips=("127.0.0.1", service_ip),
    )
    admin = ca.issue("admin", "numaplane-admin", organizations=("system:masters",))
    kubelet_client = ca.issue(
        "apiserver-kubelet-client", "kube-apiserver-kubelet-client", organizations=("system:masters",)
    )
    proxy_client = front.issue("front-proxy-client", "front-proxy-client")
    sa_key = ec.generate_private_key(ec.SECP256R1())
    sa_private = _write(folder / "sa.key", _key_pem(sa_key))
    sa_public = _write(
        folder / "sa.pub",
        sa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
    )
    return ClusterPKI(
        ca=ca,
        front_proxy_ca=front,
        serving_cert=serving[0],
        serving_key=serving[1],
        admin_cert=admin[0],
        admin_key=admin[1],
        apiserver_kubelet_cert=kubelet_client[0],
        apiserver_kubelet_key=kubelet_client[1],
        front_proxy_client_cert=proxy_client[0],
        front_proxy_client_key=proxy_client[1],
        sa_private=sa_private,
        sa_public=sa_public,
    )
