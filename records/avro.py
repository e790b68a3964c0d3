"""Code generated from our Avro schemas: binary readers that build the typed classes directly, and
writers from the typed classes to the Avro datums fastavro encodes.

Why not fastavro's `schemaless_reader`: it interprets the schema for every datum and builds a dict
per record, about 1 µs per nested task id on this machine, which caps a realistic mix of our
records below 150,000 records/s (bench/bench_records.py). The coordinator replays whole topic
partitions at load and the Spark audit decodes every record, so decoding is the hot path. Here
each schema is compiled once into straight-line Python that reads the Avro binary encoding (Avro
1.11 spec, "Binary Encoding") and calls the record class's constructor, with an inline fast path
for the common one-byte varints. fastavro remains the writer and the reference: the tests decode
everything fastavro writes and compare.

A generated reader is `read(buf, pos) -> (obj, pos)`. It raises `IndexError` when the bytes end
early, `UnicodeDecodeError` for a bad string and `AvroError` for anything else malformed; the codec
turns all three into `RecordDecodeError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

import msgspec

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


class AvroError(ValueError):
    """Malformed Avro binary data."""


def read_long(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint of up to 10 bytes; the slow path of the generated readers."""
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise AvroError(f"varint longer than 10 bytes at offset {pos - 10}")


def snake_case(avro_name: str) -> str:
    """Avro field name -> Python attribute: `GroupEpoch` -> `group_epoch`."""
    return "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(avro_name))


def attributes(cls: type) -> list[tuple[str, Any]]:
    """A record class's attributes in order, each with its default (`MISSING`: none): a dataclass's
    fields, or a msgspec Struct's (the shapes the records share with the HTTP API)."""
    if is_dataclass(cls):
        return [
            (
                f.name,
                f.default
                if f.default is not MISSING
                else MISSING
                if f.default_factory is MISSING
                else f.default_factory(),
            )  # type: ignore[misc]
            for f in fields(cls)
        ]
    return [
        (
            f.name,
            f.default
            if f.default is not msgspec.NODEFAULT
            else MISSING
            if f.default_factory is msgspec.NODEFAULT
            else f.default_factory(),
        )
        for f in msgspec.structs.fields(cls)
    ]


def _is_task_id(cls: type, kinds: list[Any]) -> bool:
    """A frozen (string, int) Struct (TaskId): shared between records once decoded, so cached."""
    config = getattr(cls, "__struct_config__", None)
    return config is not None and config.frozen and kinds in (["string", "int"], ["string", "long"])


def _short(name: str) -> str:
    return name.rpartition(".")[2]


class _Codegen:
    """What generating a reader and a writer share: named types, record classes, fresh locals."""

    def __init__(self, classes: Mapping[str, type], top_class: type, env: dict[str, Any]) -> None:
        self.classes = classes
        self.top_class = top_class
        self.named: dict[str, dict[str, Any]] = {}
        self.env = env
        self.count = 0

    def resolve(self, schema: Any) -> Any:
        """A named-type reference -> its definition (Avro defines a named type at first use only)."""
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return self.named[schema]
        if isinstance(schema, dict) and schema["type"] == "record":
            self.named.setdefault(schema["name"], schema)
        return schema

    def class_for(self, schema: dict[str, Any], top: bool) -> tuple[type, str]:
        """The class a record schema maps to, and its name in the generated code."""
        cls = self.top_class if top else self.classes[_short(schema["name"])]
        name = f"C_{cls.__name__}"
        self.env[name] = cls
        return cls, name

    def local(self) -> str:
        self.count += 1
        return f"v{self.count}"

    def define(self, source: str, label: str) -> Callable[..., Any]:
        namespace = dict(self.env)
        exec(compile(source, f"<{label} {self.top_class.__name__}>", "exec"), namespace)  # noqa: S102
        function = namespace[source[4 : source.index("(")]]
        function.__source__ = source
        return function


class _Reader(_Codegen):
    """Emits the statements of one reader. Each `value` call reads one datum into a new local."""

    def __init__(self, classes: Mapping[str, type], top_class: type) -> None:
        super().__init__(
            classes,
            top_class,
            {"_read_long": read_long, "AvroError": AvroError, "_tuple": tuple},
        )
        self.lines: list[str] = []
        self.in_span = False  # inside the decode of a span-cached record: decode it, do not recurse

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def long(self, indent: int, target: str) -> None:
        # Most varints in our records (epochs below 64, task numbers, lengths) are one byte.
        self.emit(indent, "x = buf[pos]")
        self.emit(indent, "if x < 128:")
        self.emit(indent + 1, f"{target} = (x >> 1) ^ -(x & 1)")
        self.emit(indent + 1, "pos += 1")
        self.emit(indent, "else:")
        self.emit(indent + 1, f"{target}, pos = _read_long(buf, pos)")

    def sized(self, indent: int, target: str, what: str, text: bool) -> None:
        self.long(indent, "n")
        self.emit(indent, "end = pos + n")
        self.emit(indent, "if n < 0 or end > len(buf):")
        self.emit(indent + 1, f"raise AvroError(f'{what} of {{n}} bytes at offset {{pos}} runs past the end')")
        self.emit(indent, f"{target} = buf[pos:end]{'.decode()' if text else ''}")
        self.emit(indent, "pos = end")

    def value(self, schema: Any, indent: int, top: bool = False) -> str:
        """Emit code reading one datum of `schema`; return the name of the local holding it."""
        schema = self.resolve(schema)
        target = self.local()
        if isinstance(schema, list):
            self.union(schema, indent, target)
        elif isinstance(schema, str):
            self.primitive(schema, indent, target)
        elif schema["type"] == "array":
            self.array(schema, indent, target)
        elif schema["type"] == "record":
            self.record(schema, indent, target, top)
        else:
            raise TypeError(f"schema type {schema['type']!r} is not used by the records")
        return target

    def primitive(self, kind: str, indent: int, target: str) -> None:
        if kind in ("int", "long"):
            self.long(indent, target)
        elif kind == "string":
            self.sized(indent, target, "string", text=True)
        elif kind == "bytes":
            self.sized(indent, target, "bytes", text=False)
        elif kind == "boolean":
            self.emit(indent, "x = buf[pos]")
            self.emit(indent, "if x > 1:")
            self.emit(indent + 1, "raise AvroError(f'boolean byte {x} at offset {pos}')")
            self.emit(indent, f"{target} = x == 1")
            self.emit(indent, "pos += 1")
        elif kind == "null":
            self.emit(indent, f"{target} = None")
        else:
            raise TypeError(f"Avro {kind} is not used by the records")

    def union(self, branches: list[Any], indent: int, target: str) -> None:
        # Our unions are all ["null", X]: branch index 0 is null, 1 is the value.
        if len(branches) != 2 or branches[0] != "null":
            raise TypeError(f"only [null, X] unions are supported, got {branches}")
        self.long(indent, "n")
        self.emit(indent, "if n == 0:")
        self.emit(indent + 1, f"{target} = None")
        self.emit(indent, "elif n == 1:")
        inner = self.value(branches[1], indent + 1)
        self.emit(indent + 1, f"{target} = {inner}")
        self.emit(indent, "else:")
        self.emit(indent + 1, "raise AvroError(f'union branch {n} at offset {pos} does not exist')")

    def array(self, schema: dict[str, Any], indent: int, target: str) -> None:
        items = self.local()
        self.emit(indent, f"{items} = []")
        self.emit(indent, "while True:")
        self.long(indent + 1, "count")
        self.emit(indent + 1, "if count == 0:")
        self.emit(indent + 2, "break")
        self.emit(indent + 1, "if count < 0:  # a block that also gives its size in bytes")
        self.emit(indent + 2, "count = -count")
        self.long(indent + 2, "n")
        self.emit(indent + 1, "for _ in range(count):")
        item = self.value(schema["items"], indent + 2)
        self.emit(indent + 2, f"{items}.append({item})")
        self.emit(indent, f"{target} = _tuple({items})")

    def record(self, schema: dict[str, Any], indent: int, target: str, top: bool) -> None:
        cls, name = self.class_for(schema, top)
        kinds = [self.resolve(f["type"]) for f in schema["fields"]]
        if _is_task_id(cls, kinds):
            self.interned(cls, name, indent, target)
            return
        if not top and not self.in_span and kinds and all(self.skippable(k) for k in kinds):
            self.span_cached(schema, cls, indent, target)
            return
        names = [snake_case(field["name"]) for field in schema["fields"]]
        values = [self.value(field["type"], indent) for field in schema["fields"]]
        attrs = [attr for attr, _ in attributes(cls)]
        if names == attrs[: len(names)]:  # positional when the schema is a prefix of the class: faster
            args = values
        elif set(attrs).issuperset(names):
            args = [f"{attr}={value}" for attr, value in zip(names, values, strict=True)]
        else:
            raise TypeError(f"{cls.__name__} lacks attributes {sorted(set(names) - set(attrs))} of its schema")
        self.emit(indent, f"{target} = {name}({', '.join(args)})")

    def skippable(self, schema: Any) -> bool:
        """Whether `skip` can step over `schema`: arrays of strings and of (string, int) records."""
        schema = self.resolve(schema)
        if schema in ("string", "int", "long"):
            return True
        if isinstance(schema, dict) and schema["type"] == "array":
            return self.skippable(schema["items"])
        if isinstance(schema, dict) and schema["type"] == "record":
            return all(self.skippable(f["type"]) for f in schema["fields"])
        return False

    def skip(self, schema: Any, indent: int) -> None:
        """Emit code that steps `pos` over one datum without building it."""
        schema = self.resolve(schema)
        if schema in ("int", "long"):
            self.emit(indent, "while buf[pos] >= 128:")
            self.emit(indent + 1, "pos += 1")
            self.emit(indent, "pos += 1")
        elif schema == "string":
            self.long(indent, "n")
            self.emit(indent, "if n < 0:")
            self.emit(indent + 1, "raise AvroError(f'string of {n} bytes at offset {pos}')")
            self.emit(indent, "pos += n")
        elif schema["type"] == "record":
            for f in schema["fields"]:
                self.skip(f["type"], indent)
        else:  # array
            self.emit(indent, "while True:")
            self.long(indent + 1, "count")
            self.emit(indent + 1, "if count == 0:")
            self.emit(indent + 2, "break")
            self.emit(indent + 1, "if count < 0:")
            self.emit(indent + 2, "count = -count")
            self.skip("long", indent + 2)
            self.emit(indent + 1, "for _ in range(count):")
            self.skip(schema["items"], indent + 2)

    def span_cached(self, schema: dict[str, Any], cls: type, indent: int, target: str) -> None:
        """A record of arrays (ConnectorsAndTasks) looked up by its encoded bytes before decoding.

        The same assignment is written again and again: as a member's target, then in its current
        assignment at each epoch. Stepping over the bytes to find where the record ends costs a
        fraction of building it, and the bytes identify the value, so a hit is exact."""
        cache = _INTERNED.setdefault(cls, {})
        label = f"S_{cls.__name__}"
        self.env[label] = cache
        self.env["_INTERNED_MAX"] = _INTERNED_MAX
        start = self.local()
        self.emit(indent, f"{start} = pos")
        for f in schema["fields"]:
            self.skip(f["type"], indent)
        raw = self.local()
        self.emit(indent, f"{raw} = buf[{start}:pos]")
        self.emit(indent, f"{target} = {label}.get({raw})")
        self.emit(indent, f"if {target} is None:")
        self.emit(indent + 1, f"pos = {start}")
        self.in_span = True
        try:
            built = self.value(schema, indent + 1)
        finally:
            self.in_span = False
        self.emit(indent + 1, f"{target} = {built}")
        self.emit(indent + 1, f"if len({label}) >= _INTERNED_MAX:")
        self.emit(indent + 2, f"{label}.clear()")
        self.emit(indent + 1, f"{label}[{raw}] = {target}")

    def interned(self, cls: type, name: str, indent: int, target: str) -> None:
        """A (string, int) frozen Struct (TaskId) looked up by its encoded bytes before decoding.

        A topic repeats the same few thousand task ids in every assignment it writes; decoding
        the connector name and building the tuple again each time was a third of the decode time
        of a current assignment. The bytes identify the value, so a hit is exact."""
        cache = _INTERNED.setdefault(cls, {})
        self.env[f"I_{cls.__name__}"] = cache
        self.env["_INTERNED_MAX"] = _INTERNED_MAX
        self.emit(indent, "p0 = pos")
        self.long(indent, "n")
        self.emit(indent, "end = pos + n")
        self.emit(indent, "if n < 0 or end >= len(buf):")
        self.emit(indent + 1, "raise AvroError(f'string of {n} bytes at offset {pos} runs past the end')")
        self.emit(indent, "x = buf[end]")
        self.emit(indent, "if x < 128:")
        self.emit(indent + 1, "raw = buf[p0:end + 1]")
        self.emit(indent + 1, f"{target} = I_{cls.__name__}.get(raw)")
        self.emit(indent + 1, f"if {target} is None:")
        self.emit(indent + 2, f"{target} = {name}(buf[pos:end].decode(), (x >> 1) ^ -(x & 1))")
        self.emit(indent + 2, f"if len(I_{cls.__name__}) >= _INTERNED_MAX:")
        self.emit(indent + 3, f"I_{cls.__name__}.clear()")
        self.emit(indent + 2, f"I_{cls.__name__}[raw] = {target}")
        self.emit(indent + 1, "pos = end + 1")
        self.emit(indent, "else:  # a number of more than one varint byte: not worth caching")
        self.emit(indent + 1, "text = buf[pos:end].decode()")
        self.emit(indent + 1, "number, pos = _read_long(buf, end)")
        self.emit(indent + 1, f"{target} = {name}(text, number)")


# Decoded values by their encoded bytes, per class: (string, int) frozen Structs (TaskId) and records
# of arrays of them (ConnectorsAndTasks). Shared between records: treat them as values, as the
# record classes say. Bounded like the key cache.
_INTERNED: dict[type, dict[bytes, Any]] = {}
_INTERNED_MAX = 65_536


class _Writer(_Codegen):
    """Builds the expression that turns a typed object into the Avro datum fastavro writes."""

    def expression(self, schema: Any, src: str, top: bool = False) -> str:
        schema = self.resolve(schema)
        if isinstance(schema, str):
            return src
        if isinstance(schema, list):
            (branch,) = [s for s in schema if s != "null"]
            inner = self.expression(branch, src)
            return src if inner == src else f"(None if {src} is None else {inner})"
        if schema["type"] == "array":
            items = self.resolve(schema["items"])
            if isinstance(items, str):
                return f"list({src})"
            var = self.local()
            return f"[{self.expression(items, var)} for {var} in {src}]"
        self.class_for(schema, top)
        parts = []
        for field in schema["fields"]:
            value = self.expression(field["type"], f"{src}.{snake_case(field['name'])}")
            parts.append(f"{field['name']!r}: {value}")
        return "{" + ", ".join(parts) + "}"


def compile_reader(schema: dict[str, Any], cls: type, classes: Mapping[str, type]) -> Callable[[bytes, int], Any]:
    """A reader for `schema` that builds `cls`, its nested records built from `classes` by name."""
    reader = _Reader(classes, cls)
    result = reader.value(schema, 1, top=True)
    return reader.define(
        "\n".join(["def read(buf, pos):", *reader.lines, f"    return {result}, pos", ""]), "avro reader"
    )


def compile_writer(schema: dict[str, Any], cls: type, classes: Mapping[str, type]) -> Callable[[Any], dict[str, Any]]:
    """The inverse: `cls` (nested records from `classes`) -> the Avro datum of `schema`."""
    writer = _Writer(classes, cls, {})
    return writer.define(f"def write(o):\n    return {writer.expression(schema, 'o', top=True)}\n", "avro writer")
