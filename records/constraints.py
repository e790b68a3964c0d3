"""What the HTTP decoder checks of a field beyond its Python type, declared beside the shapes that carry it.

The topic's shapes (`records.model`) and the core's messages (`coordinator.core.protocol`) are the HTTP
API's bodies too (DESIGN §7): msgspec decodes a request straight into them. These `Annotated` types
say what JSON a field accepts (an integer within its Kafka width, base64 bytes) and document it in the
OpenAPI document. They cost nothing when the code builds the objects itself: msgspec checks them only
when it decodes.
"""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

# Exactly the strings msgspec's base64 decoder takes: standard alphabet, padded to a multiple of four.
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"

Int8 = Annotated[int, Meta(ge=-(2**7), le=2**7 - 1, extra_json_schema={"format": "int8"})]
Int16 = Annotated[int, Meta(ge=-(2**15), le=2**15 - 1, extra_json_schema={"format": "int16"})]
Int32 = Annotated[int, Meta(ge=-(2**31), le=2**31 - 1, extra_json_schema={"format": "int32"})]
Int64 = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1, extra_json_schema={"format": "int64"})]
Base64 = Annotated[bytes, Meta(extra_json_schema={"contentEncoding": "base64", "pattern": BASE64_PATTERN})]


def doc(text: str) -> Meta:
    """A field's description in the OpenAPI document."""
    return Meta(description=text)
