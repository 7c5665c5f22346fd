"""Azurite, Microsoft's local Azure Storage emulator (npm package in tests/azurite, installed by ./run tests).

The ``azurite`` fixture starts its blob and queue services once per module, on ports the OS picks, and yields a
connection string for the well-known development account. :class:`Azurite` starts one by hand (benchmarks,
and the OAuth mode over HTTPS, where Azurite accepts bearer tokens and checks their claims but not their
signature).
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import processes
from tests.support.tooling import require_tool

AZURITE_BIN = Path(__file__).resolve().parents[1] / "azurite" / "node_modules" / ".bin"
AZURITE_ALL = AZURITE_BIN / "azurite"
# Azurite's well-known development account and key, published in Microsoft's Azurite documentation.
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE_START_SECONDS = 180  # a hang guard: it listens within seconds, but a loaded machine is slow

def require_azurite() -> None:
    require_tool("Azurite", AZURITE_ALL, "npm ci --prefix tests/azurite")


class Azurite:
    """A running Azurite (blob and queue services; the table service listens too, unused) in ``workdir``."""

    def __init__(self, workdir: Path, *, cert: Path | None = None, key: Path | None = None) -> None:
        self.scheme = "https" if cert else "http"
        self.log = workdir / "azurite.log"
        tls = ["--cert", str(cert), "--key", str(key), "--oauth", "basic"] if cert and key else []
        with self.log.open("wb") as output:
            self.process = processes.popen(  # its own group, dying with this process
                [str(AZURITE_ALL), *(arg for service in ("blob", "queue", "table")
                                     for arg in (f"--{service}Host", "127.0.0.1", f"--{service}Port", "0")),
                 "--inMemoryPersistence", "--extentMemoryLimit", "64", "--skipApiVersionCheck", "--loose",
                 "--disableTelemetry", "--silent", *tls],
                cwd=workdir, stdout=output, stderr=subprocess.STDOUT)
        try:
            self.blob_port, self.queue_port = self._ports()
        except BaseException:
            self.stop()
            raise

    def _ports(self) -> tuple[int, int]:
        """The blob and queue ports (Azurite was started on port 0) once both accept connections."""
        deadline = time.monotonic() + AZURITE_START_SECONDS
        while time.monotonic() < deadline:
            text = self.log.read_text(errors="replace")
            found = [re.search(rf"{service} service is successfully listening at https?://127\.0\.0\.1:(\d+)", text)
                     for service in ("Blob", "Queue")]
            if all(found):
                ports = [int(match[1]) for match in found if match]
                try:
                    for port in ports:
                        socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    return ports[0], ports[1]
                except OSError:
                    pass
            if self.process.poll() is not None:
                pytest.fail(f"Azurite exited with {self.process.returncode}: {text[-2000:]}")
            time.sleep(0.05)
        pytest.fail(f"Azurite did not listen within {AZURITE_START_SECONDS} s: {self.log.read_text()[-2000:]}")

    @property
    def blob_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.blob_port}/{DEV_ACCOUNT}"

    @property
    def queue_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.queue_port}/{DEV_ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol={self.scheme};AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
                f"BlobEndpoint={self.blob_url};QueueEndpoint={self.queue_url};")

    def stop(self) -> None:
        self.process.terminate()
        processes.kill_group(self.process, grace_s=10)


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running Azurite (blob and queue); yields its connection string."""
    require_azurite()
    emulator = Azurite(tmp_path_factory.mktemp("azurite"))
    try:
        yield emulator.connection_string
    finally:
        emulator.stop()
