"""The DLQ command acts on its deployment's records: services reading one topic share
its DLT.

Contract: a DLT record says the deployment that wrote it (``dlt-app-id``); the command,
run with a service's ``APP_ID``, reads that service's records and those written before
records said whose they are, and leaves the others out, saying how many of which
``APP_ID`` (an operator whose ``APP_ID`` is not the service's reads why the DLT looks
empty). Without ``APP_ID`` it reads every service's records, shows whose each is, and
refuses to replay or skip a selection that holds several services' records. What it
publishes (replay, skip) names the deployment, so that a consumer of the same name in
another service leaves it alone.
"""

from __future__ import annotations

import pytest
from rich.console import Console

from dlq import headers as h
from dlq import render
from dlq.commands import Target, one_deployment, others
from dlq.errors import CommandError
from dlq.records import replay_record
from tests.dlq_letters import DLT, entry, letter

BILLING = "billing"


def target(app_id: str | None) -> Target:
    return Target(None, "sqlite+aiosqlite:///unused.db", DLT, 60.0, app_id)  # type: ignore[arg-type]


def test_a_deployment_reads_its_own_records_and_those_that_name_none() -> None:
    billing = target(BILLING)

    assert billing.ours(letter(1, app_id=BILLING))
    assert billing.ours(letter(2))  # written before records said whose they are
    assert not billing.ours(letter(3, app_id="shipping"))
    assert target(None).ours(letter(4, app_id="shipping"))


def test_the_others_left_out_are_counted_by_deployment() -> None:
    letters = [
        letter(1, app_id=BILLING),
        letter(2, app_id="shipping"),
        letter(3, app_id="shipping"),
        letter(4, app_id="audit-team"),
        letter(5),
    ]

    said = others(target(BILLING), letters)

    assert said == (
        "left out, 3 record(s) of other deployments (APP_ID audit-team: 1, shipping: 2), "
        "this one being APP_ID billing"
    )
    assert others(target(BILLING), letters[:1] + letters[-1:]) == ""


def test_a_replay_names_the_commands_deployment() -> None:
    dead = letter(1, app_id=BILLING)

    out = replay_record(dead.record, skip=True, consumer="audit", app_id=BILLING)

    headers = dict(out.headers)
    assert headers[h.DLT_APP_ID] == BILLING.encode()
    assert headers[h.RETRY_CONSUMER_GROUP] == b"audit"
    assert [name for name, _ in out.headers].count(h.DLT_APP_ID) == 1


def test_without_app_id_a_selection_of_several_deployments_is_refused() -> None:
    theirs = [entry(letter(1, app_id=BILLING)), entry(letter(2, app_id="shipping"))]

    with pytest.raises(
        CommandError, match=r"several deployments \(APP_ID billing: 1, shipping: 1\)"
    ):
        one_deployment(theirs)
    one_deployment([theirs[0], entry(letter(3))])  # one deployment, and a record of none


def test_without_app_id_the_table_says_whose_each_record_is() -> None:
    console = Console(width=250, record=True, color_system=None)
    rows = [entry(letter(1, app_id=BILLING)), entry(letter(2, app_id="shipping"))]

    console.print(render.table(rows))

    lines = console.export_text().splitlines()
    assert "APP_ID" in next(line for line in lines if "DLT" in line)
    assert "shipping" in next(line for line in lines if "0:2" in line)
    console.print(render.table(rows[:1]))
    assert "APP_ID" not in console.export_text()
