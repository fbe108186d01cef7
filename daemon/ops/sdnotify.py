"""systemd's notify protocol (``sd_notify``): ``READY=1``, ``STOPPING=1``, ``WATCHDOG=1``.

A unit with ``Type=notify`` hands the daemon ``NOTIFY_SOCKET``, a Unix datagram socket
(a path, or an abstract name written with a leading ``@``); each state is one datagram of
``KEY=VALUE`` lines. With ``WatchdogSec=`` set, systemd also hands ``WATCHDOG_USEC`` (and
``WATCHDOG_PID``): the daemon must send ``WATCHDOG=1`` more often than that, or be
restarted; half the period is what sd_watchdog_enabled(3) advises.

Written here rather than taken from a library: the protocol is these few lines of the
standard library; the small pure-Python packages for it are unmaintained (sdnotify, last
released in 2017, which does not read the watchdog's period either) or little used
(systemd-watchdog), and the maintained bindings (systemd-python, cysystemd) build against
libsystemd's C headers.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import MutableMapping

log = logging.getLogger("harnessd.ops")


class Notifier:
    """The service manager's socket, taken from the environment once (and removed from it,
    so that processes the daemon starts do not talk to systemd in its name)."""

    def __init__(self, environ: MutableMapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        address = env.pop("NOTIFY_SOCKET", "")
        usec = env.pop("WATCHDOG_USEC", "")
        pid = env.pop("WATCHDOG_PID", "")
        self.address: str | None = None
        if address.startswith("@"):
            self.address = "\0" + address[1:]  # an abstract socket name
        elif address.startswith("/"):
            self.address = address
        elif address:
            log.warning("NOTIFY_SOCKET %r is neither a path nor an abstract name; ignored", address)
        self.watchdog_s: float | None = None
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_s = int(usec) / 1e6

    @property
    def enabled(self) -> bool:
        return self.address is not None

    @property
    def ping_every_s(self) -> float | None:
        """How often to send ``WATCHDOG=1`` (half the watchdog period), or None: no watchdog."""
        return None if self.watchdog_s is None or not self.enabled else self.watchdog_s / 2

    def notify(self, *states: str) -> None:
        """Send ``states`` (``"READY=1"``, ``"STATUS=..."``) as one datagram; a service
        manager that is gone is logged, never fatal."""
        if self.address is None:
            return
        message = "\n".join(states).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(self.address)
                sock.sendall(message)
        except OSError as exc:
            log.warning("could not notify the service manager (%s): %s", states[0], exc)
