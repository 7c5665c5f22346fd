from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.demo.backend import DemoBackend
from bot.sentinel.client import SentinelClient
from tests.support.bench_smoke import SharedSmokeRuns, SmokeRuns, start_shared
from tests.support.connector_fake import FakeConnector
from tests.support.demo import copied_demo
from tests.support.loganalytics_fake import FakeLogAnalytics
from tests.support.openai_fake import FakeOpenAI

# Fixtures shared by test modules: `azurite` (Azure Storage's emulator, tests/support/azurite.py).
pytest_plugins = ("tests.support.azurite",)

# Machine setup, not test data: tiktoken downloads its encoding files on first use. On a machine without
# internet access, an offline copy in ../shared/tiktoken (beside the clone) is used when there is one and
# TIKTOKEN_CACHE_DIR is not set. Test data and schemas live in the repository (tests/data, tests/schemas).
_OFFLINE_TIKTOKEN = Path(__file__).resolve().parents[1].parent / "shared" / "tiktoken"
if "TIKTOKEN_CACHE_DIR" not in os.environ and _OFFLINE_TIKTOKEN.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_OFFLINE_TIKTOKEN)

# A fixed clock in the middle of a UTC day, so windows and bins are the same on every run.
NOW = datetime(2026, 11, 20, 15, 30, tzinfo=UTC)
SEED = 7
SMOKE_TEST = "test_benchmark_smoke_run"  # tests/test_benchmarks.py: checks a benchmark's smoke run


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The benchmark smoke runs' tests go last: their runs go on in the background meanwhile."""
    items.sort(key=lambda item: getattr(item, "originalname", "") == SMOKE_TEST)  # stable: the rest keep their order


@pytest.fixture(scope="session", autouse=True)
def benchmark_smoke_runs(request: pytest.FixtureRequest,
                         tmp_path_factory: pytest.TempPathFactory) -> Iterator[SmokeRuns | SharedSmokeRuns]:
    """The smoke runs of the benchmarks whose tests this session runs, started with its first test (by one test
    process of several: tests/support/bench_smoke.py)."""
    names = [item.callspec.params["name"] for item in request.session.items
             if getattr(item, "originalname", "") == SMOKE_TEST]
    if "PYTEST_XDIST_WORKER" not in os.environ:
        runs = SmokeRuns(names)
        try:
            yield runs
        finally:
            runs.stop()
        return
    # Every worker's base temporary folder sits in the run's one folder.
    owned, shared = start_shared(names, tmp_path_factory.getbasetemp().parent / "bench-smoke")
    try:
        yield shared
    finally:
        if owned is not None:
            owned.stop(finish=not request.session.shouldstop)


@pytest.fixture
def now() -> datetime:
    return NOW


@pytest.fixture
def demo_backend() -> DemoBackend:
    return copied_demo(SEED, lambda: NOW)  # a copy of the run's one build: writes stay in the test


@pytest.fixture
def demo_client(demo_backend: DemoBackend) -> SentinelClient:
    return SentinelClient(demo_backend)


@pytest.fixture
async def fake_logs(tmp_path: Path) -> AsyncIterator[FakeLogAnalytics]:
    server = await FakeLogAnalytics(tmp_path).start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


@pytest.fixture
async def connector() -> AsyncIterator[FakeConnector]:
    """The Bot Connector service a bot answers through (tests/support/connector_fake.py)."""
    fake = await FakeConnector().start()
    yield fake
    await fake.stop()
