"""The TLS identity of a gateway front: a self-signed certificate made for one runtime.

Remote units pin this exact certificate (it travels in the unit, it is public; see
``sandbox.bridge.client_context``), so no CA is involved and nothing but this daemon can
answer their connections. The key never leaves the private directory it is made in, and
dies with the runtime. Made with the ``openssl`` command (the standard library can use TLS
but not make a certificate).
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path

from daemon.errors import SetupError

_DAYS = "30"  # outlives any runtime; a restart makes a new one anyway


@dataclass(frozen=True)
class Identity:
    cert_pem: str
    cert_path: Path
    key_path: Path

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.load_cert_chain(self.cert_path, self.key_path)
        return ctx


def make_identity(folder: Path) -> Identity:
    """A fresh key and certificate in ``folder`` (created 0700). Blocking: call in a thread."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise SetupError(
            "the ray executor needs the 'openssl' command for its gateway's TLS certificate: "
            "install it (Debian/Ubuntu: apt-get install openssl)"
        )
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    cert, key = folder / "gateway-cert.pem", folder / "gateway-key.pem"
    done = subprocess.run(
        [
            openssl,
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            _DAYS,
            "-subj",
            "/CN=harnessd-gateway",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if done.returncode != 0:
        raise SetupError(f"openssl could not make the gateway certificate: {done.stderr[-300:]}")
    key.chmod(0o600)
    return Identity(cert.read_text(), cert, key)
