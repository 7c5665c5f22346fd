"""Azurite, Microsoft's local Azure Storage emulator (npm package in tests/azurite, installed by ./run tests).

The ``azurite`` fixture starts its blob service once per module, on a port the OS picks, and yields a
connection string for the well-known development account.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tooling import require_tool

AZURITE_BLOB = Path(__file__).resolve().parents[1] / "azurite" / "node_modules" / ".bin" / "azurite-blob"
# Azurite's well-known development account and key, published in Microsoft's Azurite documentation.
DEV_ACCOUNT = "devstoreaccount1"
DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE_START_SECONDS = 60

def require_azurite() -> None:
    require_tool("Azurite", AZURITE_BLOB, "npm ci --prefix tests/azurite")


def _wait_until_listening(process: subprocess.Popen, log: Path) -> int:
    """Azurite's port (it was started on port 0) once it accepts connections."""
    deadline = time.monotonic() + AZURITE_START_SECONDS
    while time.monotonic() < deadline:
        found = re.search(r"listens on https?://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if found:
            try:
                socket.create_connection(("127.0.0.1", int(found[1])), timeout=1).close()
                return int(found[1])
            except OSError:
                pass
        if process.poll() is not None:
            pytest.fail(f"Azurite exited with {process.returncode}: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.05)
    pytest.fail(f"Azurite did not listen within {AZURITE_START_SECONDS} s: {log.read_text(errors='replace')[-2000:]}")


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running Azurite blob service; yields its connection string."""
    require_azurite()
    workdir = tmp_path_factory.mktemp("azurite")
    log = workdir / "azurite.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(AZURITE_BLOB), "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence",
             "--extentMemoryLimit", "64", "--skipApiVersionCheck", "--loose", "--disableTelemetry", "--silent"],
            cwd=workdir, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        port = _wait_until_listening(process, log)
        yield (f"DefaultEndpointsProtocol=http;AccountName={DEV_ACCOUNT};AccountKey={DEV_KEY};"
               f"BlobEndpoint=http://127.0.0.1:{port}/{DEV_ACCOUNT};")
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
