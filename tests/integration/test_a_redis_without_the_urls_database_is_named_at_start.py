"""A ``REDIS_URL`` naming a database the Redis does not have is a mistake named at start.

Contract: the check the worker makes before it starts (``app.prefilter.client.refusal``)
says, in one line, that the Redis at its address has no such database and which part of
``REDIS_URL`` to look at, where before the prefilter came up "on", failed every call and
opened its circuit with only ``ResponseError`` to say why. The right database passes.
"""

from __future__ import annotations

import pytest

from app.prefilter.client import refusal

pytestmark = pytest.mark.integration


async def test_a_database_index_out_of_range_is_refused(redis_url: str) -> None:
    beyond = redis_url.rpartition("/")[0] + "/99"

    said = await refusal(beyond, 3.0)

    assert said is not None
    assert said.startswith("cannot use Redis at 127.0.0.1:6379 (REDIS_URL): it has no such")
    assert said.endswith("check the /<db> of REDIS_URL")
    assert await refusal(redis_url, 3.0) is None
