"""The harness tells a test what a worker would wait on or refuse to start with.

Contract: a ``send`` whose batch keeps pausing on an infrastructure failure (a handler's
statement meeting a database that is gone) raises ``InfrastructurePaused`` after
``PAUSES_BEFORE_RAISING`` pauses, the failure as its cause and named in the message,
where a worker would wait for the database to come back (before, the test hung); a
handler's own ``TimeoutError`` is its failure, routed to the first retry tier, with no
pause. A handler that never returns is cut off after ``handler_timeout`` (a worker's
``HANDLER_TIMEOUT_SECONDS``) and its event retried. Starting a harness on a package that
imports a module registering a handler from outside it raises the ``ConfigurationError``
the worker starts with (before, the harness left that handler out and the test passed),
whether or not the package was imported before, and every time. A start that fails
leaves no temporary database folder behind. ``feed.raw`` takes headers as a producer's
client does (a mapping or pairs, values bytes or text) and refuses any other value by
its header's name (before, a dict or a text value failed deep in the pipeline).
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from app.db.tables import failed_event
from app.errors import ConfigurationError, InfrastructureError
from app.testing import Harness, InfrastructurePaused, Kind, event
from app.testing.feed import Records
from app.testing.harness import PAUSES_BEFORE_RAISING

_names = count()

SERVICE = """\
import asyncio

from sqlalchemy.exc import OperationalError

from app import HandlerContext, handler


@handler("OrderPaid", consumer="{consumer}")
async def paid(event, ctx: HandlerContext) -> None:
    if event.event_id == "down":
        raise OperationalError("SELECT 1", {{}}, ConnectionRefusedError("db:5432 refused"))
    if event.event_id == "slow":
        raise TimeoutError("payment API timed out")
    if event.event_id == "hangs":
        await asyncio.sleep(3600)  # an outside call without a timeout of its own
"""

IMPORTS_AN_OUTSIDER = """\
from app import handler
from {package}_shared import audit  # noqa: F401  registers a consumer from outside
"""

SHARED = '''\
from app import handler


@handler("OrderPaid", consumer="audit-{package}")
async def audit(event, ctx) -> None:
    """Registered by a module outside the listed package."""
'''


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(tmp_path))
        yield tmp_path


def paid(event_id: str) -> dict[str, object]:
    data = {"orderId": "o-1", "userId": "u-1", "amount": "5.00", "paidAt": "2024-05-01T12:00:00Z"}
    return event("OrderPaid", "o-1", 1, data, event_id=event_id)


async def test_a_batch_that_keeps_pausing_raises_with_its_cause(folder: Path) -> None:
    package = f"pausing{next(_names)}"
    (folder / f"{package}.py").write_text(SERVICE.format(consumer=package))

    async with Harness(package) as h:
        with pytest.raises(InfrastructurePaused) as raised:
            await asyncio.wait_for(h.send(paid("down")), 30)
        outcomes = await asyncio.wait_for(h.send(paid("slow")), 30)

    assert isinstance(raised.value.__cause__, InfrastructureError)
    assert isinstance(raised.value.__cause__.__cause__, OperationalError)
    assert f"paused {PAUSES_BEFORE_RAISING} times" in str(raised.value)
    assert "db:5432 refused" in str(raised.value)
    assert [(o.consumer, o.kind) for o in outcomes] == [(package, Kind.RETRIED)]


async def test_a_handler_that_never_returns_is_cut_off_as_a_worker_cuts_it(
    folder: Path,
) -> None:
    package = f"hanging{next(_names)}"
    (folder / f"{package}.py").write_text(SERVICE.format(consumer=package))

    async with Harness(package, handler_timeout=0.2) as h:
        outcomes = await asyncio.wait_for(h.send(paid("hangs")), 30)
        [failure] = await h.rows(failed_event)

    assert [(o.consumer, o.kind) for o in outcomes] == [(package, Kind.RETRIED)]
    assert failure["exception_type"] == "app.errors.HandlerTimedOut"


@pytest.mark.parametrize("imported_first", [False, True])
async def test_a_handler_registered_from_outside_the_package_is_refused(
    folder: Path, imported_first: bool
) -> None:
    package = f"importer{next(_names)}"
    (folder / f"{package}_shared.py").write_text(SHARED.format(package=package))
    (folder / f"{package}.py").write_text(IMPORTS_AN_OUTSIDER.format(package=package))
    if imported_first:  # as a test module does that imports the package's tables first
        importlib.import_module(package)

    with pytest.raises(ConfigurationError, match=f"'{package}_shared' registers consumer"):
        await Harness(package).start()
    with pytest.raises(ConfigurationError, match=f"'{package}_shared' registers consumer"):
        await Harness(package).start()  # and again: not only at the first import


async def test_a_start_that_fails_leaves_no_folder_behind(folder: Path) -> None:
    package = f"importer{next(_names)}"
    (folder / f"{package}_shared.py").write_text(SHARED.format(package=package))
    (folder / f"{package}.py").write_text(IMPORTS_AN_OUTSIDER.format(package=package))
    harness = Harness(package)
    made = harness._folder
    assert made is not None and made.exists()

    with pytest.raises(ConfigurationError):
        await harness.start()

    assert not made.exists()


@pytest.mark.parametrize(
    "headers",
    [
        {"id": "e-1", "eventType": b"OrderPaid"},
        [("id", "e-1"), ("eventType", "OrderPaid")],
        (("id", b"e-1"), ("eventType", b"OrderPaid")),
    ],
)
def test_raw_records_take_headers_as_a_producer_gives_them(headers: object) -> None:
    record = Records("orders").raw(b"{}", headers=headers)  # type: ignore[arg-type]

    assert record.headers == (("id", b"e-1"), ("eventType", b"OrderPaid"))


def test_a_header_value_that_is_neither_bytes_nor_text_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="header 'id': give bytes or text, not int"):
        Records("orders").raw(b"{}", headers={"id": 7})  # type: ignore[dict-item]
