"""The group leader's assignment asks the broker again for topics its metadata lacks.

The leader assigns partitions from its client's metadata. A leader whose metadata lacks
a topic the group subscribes to (a worker that started as the broker went down and came
back: its first metadata request failed, and the group re-formed before the next one)
assigns none of that topic's partitions, and faust says only "Ignoring missing topic".
aiokafka re-forms the group once the metadata shows the topic, but refreshes it only
every ``metadata_max_age_ms`` (5 minutes): until then nobody consumes it, a stall
without an error. ``PartitionAssignor`` asks for the metadata at once, and again every
``ASK_AGAIN_SECONDS`` while a topic is still missing (for ``GIVE_UP_SECONDS`` at most);
once it arrives, aiokafka sees the change and re-forms the group.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from faust.assignor import PartitionAssignor as FaustAssignor

ASK_AGAIN_SECONDS = 1.0
GIVE_UP_SECONDS = 300.0
log = logging.getLogger("effectively_once.worker")


def missing_topics(cluster: Any, member_metadata: Mapping[Any, Any]) -> list[str]:
    """The topics some member subscribes to that ``cluster`` (the leader's metadata) lacks."""
    wanted = {topic for member in member_metadata.values() for topic in member.subscription}
    return sorted(topic for topic in wanted if not cluster.partitions_for_topic(topic))


class PartitionAssignor(FaustAssignor):
    """faust's assignor that asks for metadata again while a subscribed topic is missing."""

    def assign(self, cluster: Any, member_metadata: Any) -> Any:
        missing = missing_topics(cluster, member_metadata)
        if missing:
            log.warning(
                "the group's leader knows no partitions of %s: it assigns what it knows and "
                "asks the broker again",
                ", ".join(repr(topic) for topic in missing),
            )
            self._ask_until_known(cluster, member_metadata, time.monotonic() + GIVE_UP_SECONDS)
        return super().assign(cluster, member_metadata)

    def _ask_until_known(self, cluster: Any, member_metadata: Any, until: float) -> None:
        client = self._client()
        if client is None or not missing_topics(cluster, member_metadata):
            return
        client.force_metadata_update()
        if time.monotonic() < until:
            asyncio.get_running_loop().call_later(
                ASK_AGAIN_SECONDS, self._ask_until_known, cluster, member_metadata, until
            )

    def _client(self) -> Any:
        """The aiokafka client of the worker's consumer (the one this assignor serves)."""
        thread = getattr(self.app.consumer, "_thread", None)
        consumer = getattr(thread, "_consumer", None)
        return getattr(consumer, "_client", None)
