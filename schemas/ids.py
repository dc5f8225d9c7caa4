"""Ids as producers write them: a JSON string or a JSON integer, one text inside.

Producers written in Java, Go or SQL send ``"orderId": 100001`` as often as
``"orderId": "100001"``; both are the id ``"100001"`` everywhere past decoding
(dedup, version gate, tables, Redis keys, DLT headers, trace). Declare every id
field of an event model with this type, the envelope's and your own::

    from schemas.ids import Id, IdField

    class OrderShipped(BaseModel):
        order_id: Id                                    # any length
        carrier_ref: Annotated[str, IdField(max_length=64)]  # no longer than its column

A float (``100001.0``), a boolean, an object, an array or ``null`` is not an
id: validation fails, and the event is poison (``invalid-schema``). An id the
framework stores (the envelope's ``eventId`` and ``aggregateId``) also refuses
control characters (PostgreSQL cannot store NUL): ``IdField(stored=True)``.
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

NO_CONTROL_CHARACTERS = r"^[^\x00-\x1f\x7f]*$"
"""The pattern every id (and every type name of the envelope) matches."""

ID_TYPE_ERROR = "id_type"
ID_TYPE_MESSAGE = "an id is a JSON string or a JSON integer"


class IdField:
    """``Annotated[str, IdField(max_length=n)]``: a string or an integer, read as text of at
    least one and at most ``max_length`` characters (``None``: no limit); ``stored``: and
    no control character, as a database column of the framework must hold it."""

    __slots__ = ("max_length", "stored")

    def __init__(self, max_length: int | None = None, stored: bool = False) -> None:
        self.max_length = max_length
        self.stored = stored

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        # A string passes as it is (no Python call); an integer becomes its decimal text.
        kinds = core_schema.union_schema(
            [
                core_schema.str_schema(strict=True),
                core_schema.chain_schema(
                    [
                        core_schema.int_schema(strict=True),  # strict: no bool, no float
                        core_schema.no_info_plain_validator_function(str),
                    ]
                ),
            ],
            custom_error_type=ID_TYPE_ERROR,
            custom_error_message=ID_TYPE_MESSAGE,
            mode="left_to_right",
        )
        text = core_schema.str_schema(
            min_length=1,
            max_length=self.max_length,
            # A regular expression per field costs: only where a column needs it.
            pattern=NO_CONTROL_CHARACTERS if self.stored else None,
        )
        return core_schema.chain_schema([kinds, text])

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        text: dict[str, Any] = {"type": "string", "minLength": 1}
        if self.max_length is not None:
            text["maxLength"] = self.max_length
        return {"anyOf": [text, {"type": "integer"}]}


Id = Annotated[str, IdField()]
"""An id of any length: a JSON string or integer, text inside."""


def id_text(value: object) -> str | None:
    """The text of an id as JSON gave it (a string as it is, an integer in decimal), or
    ``None`` for anything that is no id (a float, a boolean, null...). No length check."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[return-value]
    if kind is int:
        return str(value)
    return None


def id_spellings(text: str) -> list[str]:
    """The ids a person may mean by ``text``, as typed at a command line: the id a JSON
    literal spells (``"100001"`` with its quotes, ``100001``) first, then ``text`` itself."""
    try:
        spelled = id_text(orjson.loads(text.strip()))
    except orjson.JSONDecodeError:
        spelled = None
    return [spelled, text] if spelled and spelled != text else [text]
