from __future__ import annotations

import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.demo.backend import DemoBackend
from bot.lifetime import die_with_parent
from bot.sentinel.client import SentinelClient
from tests.support import kusto, processes
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
SMOKE_TEST = "test_benchmark_smoke_run"  # tests/house/test_benchmarks.py: checks a benchmark's smoke run


LEFTOVER_GRACE_S = 3.0  # at the run's end, for processes still in their own teardown


def pytest_configure(config: pytest.Config) -> None:
    """The run's main process marks the run (each child inherits the mark: the last look below finds what is
    left); a test process (pytest-xdist) dies with the main one, and its children with it (tests/support/processes.py),
    so a run killed at any moment leaves nothing behind."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        die_with_parent(os.getppid())
    else:
        os.environ[processes.RUN_MARK] = uuid.uuid4().hex  # a fresh one, also inside another run


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's last look (main process, once every test process has gone): any process this run started that
    still runs is listed and killed, and the run says so. The Kusto parser, kept for the whole session, ends first."""
    kusto.stop()
    mark = os.environ.get(processes.RUN_MARK)
    if "PYTEST_XDIST_WORKER" in os.environ or not mark or not Path("/proc/self/environ").exists():
        return
    # This process's own children die with it (their parent-death signal; a process pool is waited for at exit)
    deadline = time.monotonic() + LEFTOVER_GRACE_S
    while (left := processes.leftovers(mark, exclude={os.getpid(), *processes.descendants(os.getpid())})) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    if not left:
        return
    processes.kill(left)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{len(left)} process(es) this test run started were still running at its end; killed them:",
             *(f"  {leftover.pid} {leftover.command}" for leftover in left)]
    for line in lines:
        if reporter is not None:
            reporter.write_line(line, yellow=True)
        else:
            print(line)


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
