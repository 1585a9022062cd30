"""TLS server contexts from PEM files, for HTTPS endpoints such as the scheduler extender.

:func:`server_context` serves ``cert_file``/``key_file`` and, given ``client_ca_file``, requires every
client to present a certificate signed by that CA (mutual TLS: kube-scheduler's extender
``tlsConfig.certFile``/``keyFile`` on its side). TLS 1.2 is the minimum. Unreadable or mismatched files
are a :class:`TLSConfigError`.

A CA signs more than one client: with the cluster CA, every kubelet's and every user's certificate
would pass the handshake. :func:`client_identity` therefore names a verified peer by its subject's
common name and its subjectAltName entries, and :func:`allowed_identity` keeps only the subjects on an
allow-list — by default kube-scheduler's own identity, :data:`DEFAULT_CLIENT_SUBJECTS` (the common
name of kubeadm's ``scheduler.conf`` client certificate). :class:`~numaplane.observability.http.ProbeServer`
refuses any other client with HTTP 403 before a route runs (issue 25 item 9).
"""

from __future__ import annotations

import ssl
from collections.abc import Collection, Mapping
from typing import Any, Final

from numaplane.observability.errors import TLSConfigError

__all__ = ["DEFAULT_CLIENT_SUBJECTS", "allowed_identity", "client_identity", "server_context"]

#: The clients a mutual-TLS endpoint accepts unless told otherwise: kube-scheduler.
DEFAULT_CLIENT_SUBJECTS: Final = ("system:kube-scheduler",)
#: subjectAltName kinds that name a client (``getpeercert()`` spelling).
_SAN_KINDS: Final = frozenset({"DNS", "URI", "email", "IP Address"})


def server_context(cert_file: str, key_file: str, client_ca_file: str | None = None) -> ssl.SSLContext:
    """A server-side context (module docstring)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise TLSConfigError(f"cannot load the certificate {cert_file} and key {key_file}: {exc}") from None
    if client_ca_file:
        try:
            context.load_verify_locations(cafile=client_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise TLSConfigError(f"cannot load the client CA {client_ca_file}: {exc}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_identity(peercert: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The names of a verified peer certificate (``ssl.SSLSocket.getpeercert()``): every subject
    common name, then every DNS, URI, email and IP subjectAltName; ``()`` without a certificate."""
    if not peercert:
        return ()
    names: list[str] = []
    for rdn in peercert.get("subject", ()):
        names.extend(str(value) for key, value in rdn if key == "commonName")
    names.extend(str(value) for kind, value in peercert.get("subjectAltName", ()) if kind in _SAN_KINDS)
    return tuple(names)


def allowed_identity(peercert: Mapping[str, Any] | None, allowed: Collection[str]) -> str | None:
    """The first name of ``peercert`` (:func:`client_identity`) that ``allowed`` lists, else ``None``."""
    return next((name for name in client_identity(peercert) if name in allowed), None)
