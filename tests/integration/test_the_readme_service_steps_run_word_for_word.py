"""The README's "Your own service" steps work as written, in a folder outside the checkout.

Contract: every Python (and ini) block of that section is written to the file its first
line names, in a fresh folder outside the repository, and every shell line is run there
in order, as written: the test with ``app.testing`` passes, with no warning; ``faust -A
app worker`` with ``HANDLER_MODULES=revenue`` becomes ready on a broker where none of its
topics exists yet (it creates the order topic, its tiers and DLT, and
``revenue-totals``); ``python send.py`` sends two paid invoices and a duplicate;
``trace`` shows ``e-1`` applied once.
Then the ``revenue`` table holds ``acme`` with 1,300 cents and ``revenue-totals`` two
``RevenueAdded`` events, on PostgreSQL and on MariaDB.

What the test does instead of a person: ``pip install`` is the test's own environment
(``PYTHONPATH`` names the checkout); ``createdb`` is the test's fresh database;
``python -m app broker`` is the run's test broker;
``export BROKER_URL`` and ``export DATABASE_URL`` take its URL and a fresh database's;
the worker runs in the background; ``trace`` is run again until the event is there. Its
own topic and group (``ORDER_TOPIC``, ``APP_ID``) and web port keep it apart from other
tests, which a person's fresh broker needs not.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson
import pytest
from sqlalchemy import text

from app.db.engine import create_engine
from app.demo.broker import free_port
from tests.integration.support.dlq import records
from tests.integration.support.session_broker import SharedBroker
from tests.integration.support.waiting import eventually
from tests.integration.support.workers import REPO_ROOT, Stream

pytestmark = pytest.mark.integration

README = REPO_ROOT / "README.md"
SECTION = "## Your own service"
EMITTED = "revenue-totals"


@dataclass(frozen=True)
class Block:
    """One fenced block of the section: its language and its text."""

    language: str
    text: str


def section_blocks() -> list[Block]:
    """The fenced blocks of the README's "Your own service" section, in order."""
    readme = README.read_text()
    assert SECTION in readme, f"README.md has no {SECTION!r} section"
    section = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return [Block(lang, body) for lang, body in re.findall(r"```(\w+)\n(.*?)```", section, re.S)]


FILE_BLOCKS = ("python", "ini")


def write_files(blocks: list[Block], folder: Path) -> list[str]:
    """Each Python (or ini) block into the file its first line names
    (``# revenue/models.py``)."""
    written = []
    for block in blocks:
        if block.language not in FILE_BLOCKS:
            continue
        first = block.text.splitlines()[0]
        assert first.startswith("# "), f"a {block.language} block names no file: {first!r}"
        path = folder / first.removeprefix("# ").strip()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.text)
        written.append(str(path.relative_to(folder)))
    return written


def shell_lines(blocks: list[Block]) -> list[str]:
    """Every command line of the shell blocks, in order."""
    return [
        line.strip()
        for block in blocks
        if block.language == "bash"
        for line in block.text.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


@pytest.fixture
def service(tmp_path: Path) -> Path:
    folder = tmp_path / "revenue-service"
    folder.mkdir()
    assert not folder.resolve().is_relative_to(REPO_ROOT.resolve())
    return folder


@pytest.fixture
def worker_log(service: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The background processes the steps started; stopped at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.mark.parametrize("backend", ["postgresql", "mariadb"])
async def test_the_readme_steps_build_a_service_that_works(
    backend: str,
    broker: SharedBroker,
    stream: Stream,
    make_database: Callable[[str], Awaitable[str]],
    service: Path,
    worker_log: list[subprocess.Popen[bytes]],
) -> None:
    database_url = await make_database(backend)
    blocks = section_blocks()
    assert write_files(blocks, service) == [
        "revenue/__init__.py",
        "revenue/models.py",
        "revenue/tables.py",
        "revenue/migrations/0001_revenue.py",
        "revenue/handlers.py",
        "tests/test_revenue.py",
        "pytest.ini",
        "send.py",
    ]
    web_port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k != "REDIS_URL"},
        "PYTHONPATH": str(REPO_ROOT),  # the framework under test, as pip install -e gives it
        "PYTHONUNBUFFERED": "1",
        "ORDER_TOPIC": stream.topic,
        "APP_ID": stream.app_id,
        "WEB_PORT": str(web_port),
        "TMPDIR": str(service),
    }
    ours = {"BROKER_URL": broker.url, "DATABASE_URL": database_url}
    already_emitted = len(await records(stream, EMITTED))
    lines = shell_lines(blocks)
    assert any("faust -A app worker" in line for line in lines)

    for line in lines:
        if line.startswith("pip install"):
            continue  # the test's environment is the installed framework
        if line.startswith("createdb "):
            continue  # the test's database is a fresh one already
        if line == "python -m app broker":
            env["BROKER_URL"] = broker.url  # the run's broker instead of a second one
            continue
        if line.startswith("export "):
            name, _, value = line.removeprefix("export ").partition("=")
            env[name] = ours.get(name, value)
            continue
        if "faust -A app worker" in line:
            worker_log.append(_start(line, service, env))
            await _ready(web_port, worker_log[-1], service / "worker.log")
            continue
        if " trace " in f" {line} ":
            shown = await eventually(
                lambda line=line: _run(line, service, env),  # type: ignore[misc]
                lambda ran: ran.returncode == 0 and "applied" in ran.stdout,
                what=f"{line!r} to show the event applied",
                within=60,
            )
            assert "revenue-service" in shown.stdout
            continue
        ran = await _run(line, service, env)
        assert ran.returncode == 0, f"{line!r} failed:\n{ran.stdout}\n{ran.stderr}"
        if "pytest" in line:  # the handler's test passes, and warns of nothing
            assert "warning" not in (ran.stdout + ran.stderr).lower(), ran.stdout + ran.stderr

    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            revenue = (await conn.execute(text("SELECT customer, cents FROM revenue"))).all()
            consumed = await conn.scalar(
                text("SELECT COUNT(*) FROM consumed_event WHERE consumer_group = 'revenue-service'")
            )
    finally:
        await engine.dispose()
    assert [tuple(row) for row in revenue] == [("acme", 1300)]
    assert consumed == 2
    emitted = await eventually(
        lambda: records(stream, EMITTED),
        lambda found: len(found) >= already_emitted + 2,
        what=f"two new events on {EMITTED}",
        within=30,
    )
    events = [orjson.loads(record.value or b"") for record in emitted]
    new = sorted(events, key=lambda e: e["eventId"])[-2:]  # UUIDv7: the newest sort last
    assert [(e["eventType"], e["aggregateId"]) for e in new] == [("RevenueAdded", "acme")] * 2
    assert sorted(e["data"]["cents"] for e in new) == [50, 1250]


async def _run(line: str, folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``line`` run by bash in ``folder`` (off the event loop)."""
    return await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", line],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


async def _ready(port: int, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until the worker's ``/ready`` answers 200; fails with its log if it exits first."""
    deadline = asyncio.get_running_loop().time() + 90
    timeout = aiohttp.ClientTimeout(total=3)
    while asyncio.get_running_loop().time() < deadline and process.poll() is None:
        try:
            async with (
                aiohttp.ClientSession(timeout=timeout) as session,
                session.get(f"http://127.0.0.1:{port}/ready") as answer,
            ):
                if answer.status == 200:
                    return
        except (aiohttp.ClientError, TimeoutError):
            pass
        await asyncio.sleep(0.3)
    raise AssertionError(f"the worker was not ready; its log:\n{_tail(log)}")


def _start(line: str, folder: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``line`` (the worker) in the background, logging to ``worker.log``."""
    with open(folder / "worker.log", "ab") as log:
        return subprocess.Popen(
            ["bash", "-c", line],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-4000:]
