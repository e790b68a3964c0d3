"""Records of the `__worker_offsets` topic: typed classes, Avro schemas, one codec (DESIGN §4).

    from records import decode, encode, to_json
    key_bytes, value_bytes = encode(Record(ConnectGroupMetadataKey("g"), ConnectGroupMetadataValue(3)))
    record = decode(key_bytes, value_bytes)

Pure: imports nothing of the project and no I/O library.
"""

from records.codec import (
    RecordDecodeError,
    RecordEncodeError,
    UnknownRecordTypeError,
    UnsupportedVersionError,
    decode,
    encode,
)
from records.model import *  # noqa: F403 - the record classes are this package's vocabulary
from records.model import __all__ as _model_all
from records.render import to_dict, to_json, value_json
from records.schema import (
    DEFAULT_FORMAT_LEVEL,
    FORMAT_LEVELS,
    MAX_FORMAT_LEVEL,
    RECORD_TYPES,
    RecordType,
    format_version,
)

__all__ = [
    *_model_all,
    "DEFAULT_FORMAT_LEVEL",
    "FORMAT_LEVELS",
    "MAX_FORMAT_LEVEL",
    "RECORD_TYPES",
    "RecordDecodeError",
    "RecordEncodeError",
    "RecordType",
    "UnknownRecordTypeError",
    "UnsupportedVersionError",
    "decode",
    "encode",
    "format_version",
    "to_dict",
    "to_json",
    "value_json",
]
