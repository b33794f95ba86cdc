"""The serving certificate, reloaded into the live TLS context when its files change.

Theory of operation: the HTTPS server is given one ``ssl.SSLContext`` for its
lifetime; every new connection takes the certificate the context holds at its
handshake, and connections already open keep theirs. ``ServingCertificate``
stats the two files (inode, device, mtime, size; through symlinks, so a
Secret volume's ``..data`` swap counts) every ``period`` seconds. On a change
it copies both into a private temporary directory (so a half-written pair
cannot change under it), loads the copies into a scratch context first (a key
that is not the certificate's fails there, not in the live context), and only
then into the live one. A failed load is logged and counted; the old
certificate keeps serving, and the next change is tried again.
Why: docs/design/webhook-registration.md, "Certificates that rotate".
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import ssl
import tempfile

from kuota_webhook import metrics

log = logging.getLogger("kuota_webhook.tls")

Stamp = tuple[tuple[int, int, int, int], ...]


def new_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


class ServingCertificate:
    def __init__(self, cert_file: str, key_file: str) -> None:
        """Load the pair; ``OSError``/``ssl.SSLError`` if it cannot serve."""
        self.cert_file, self.key_file = cert_file, key_file
        self.context = new_context()
        self._stamp = self._stat()
        self._load()
        self.loaded = 1  # loads done, the first one included

    def _stat(self) -> Stamp:
        out = []
        for path in (self.cert_file, self.key_file):
            st = os.stat(path)
            out.append((st.st_ino, st.st_dev, st.st_mtime_ns, st.st_size))
        return tuple(out)

    def _load(self) -> None:
        private = tempfile.mkdtemp(prefix="kuota-webhook-tls-")
        try:
            cert, key = os.path.join(private, "tls.crt"), os.path.join(private, "tls.key")
            shutil.copyfile(self.cert_file, cert)
            shutil.copyfile(self.key_file, key)
            new_context().load_cert_chain(cert, key)  # the pair is good ...
            self.context.load_cert_chain(cert, key)  # ... so the live context takes it
        finally:
            shutil.rmtree(private, ignore_errors=True)

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed since the last try; True if loaded."""
        try:
            stamp = self._stat()
        except OSError as e:
            log.warning("serving certificate: %s; keeping the one loaded", e)
            return False
        if stamp == self._stamp:
            return False
        self._stamp = stamp  # a bad pair is tried again only once it changes
        try:
            self._load()
        except (OSError, ssl.SSLError, ValueError) as e:
            metrics.RELOADS.labels("failed").inc()
            log.warning(
                "serving certificate %s changed but cannot be loaded (%s); keeping the one loaded",
                self.cert_file,
                e,
            )
            return False
        self.loaded += 1
        metrics.RELOADS.labels("loaded").inc()
        log.info("serving certificate %s reloaded (new handshakes use it)", self.cert_file)
        return True

    async def watch(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            self.reload_if_changed()
