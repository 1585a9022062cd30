"""TLS server contexts from PEM files, for HTTPS endpoints such as the scheduler extender.

:func:`server_context` serves ``cert_file``/``key_file`` and, given ``client_ca_file``, requires every
client to present a certificate signed by that CA (mutual TLS: kube-scheduler's extender
``tlsConfig.certFile``/``keyFile`` on its side). TLS 1.2 is the minimum. Unreadable or mismatched files
are a :class:`TLSConfigError`.
"""

from __future__ import annotations

import ssl

from numaplane.observability.errors import TLSConfigError

__all__ = ["server_context"]


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
