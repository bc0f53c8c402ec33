"""JSON-Schema generated from the config dataclasses, and strict validation against it.

The dataclasses in `drmas.config.profile` are the one source of every key's type, default and help
text (a field's `metadata`); this module turns them into a JSON-Schema (what
`drmas config schema` prints and `config/schema.yaml` holds for editors and readers) and
validates raw YAML against it with messages that name the key.

Validation is stricter than JSON-Schema's own types: an integer key rejects `2.0` and
`true`, a number key rejects NaN and infinities, because each of those got through the
schema once and failed minutes later, mid-run.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, Literal

from drmas.errors import ConfigError


#: A name that becomes part of a path (results/, data/, runs/, evals/ folders: a profile, a
#: suite, an assignment, a method, a model, an agent): letters, digits, `_`, `-` and `.`, not
#: starting with a dot (no `..`, no hidden folder). Every such key of a profile or a benchmark
#: file is checked against this one pattern (`NAME`, `NAMES`, `NAMED`).
NAME_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
NAME = {"type": "string", "pattern": NAME_PATTERN}
#: a list of such names that each name a run or a job: no name twice (a repeated seed would
#: run, and count, the same run twice)
NAMES = {"items": NAME, "uniqueItems": True}
#: a mapping whose keys are such names
NAMED = {"propertyNames": NAME}


def opt(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = dataclasses.MISSING,
        partial: type | None = None, per_name: bool = False, exclude: tuple[str, ...] = (),
        **schema) -> Any:
    """A config field: its default (or `factory`), one line of help, and JSON-Schema
    constraints (`minimum`, `exclusiveMinimum`, `maximum`, `pattern`, `minItems`, ...).

    `partial=Cls` marks a dict holding a subset of `Cls`'s keys (an override block such as a
    model's `warmstart:`); with `per_name` a dict of such blocks by name (`agents.<name>`);
    `exclude` lists keys of `Cls` such a block may not set.
    """
    meta = {"help": help, "schema": schema, "partial": partial, "per_name": per_name,
            "exclude": exclude}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:      # type: ignore[misc]
        return f.default_factory()                        # type: ignore[misc]
    return dataclasses.MISSING


def plain(value: Any) -> Any:
    """`value` as plain JSON-like data: dataclass instances become dicts, tuples lists (for
    schema defaults, resolved configs and stage keys alike)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def type_schema(tp: Any) -> dict:
    """JSON-Schema of a Python type annotation (the subset the config uses)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [type_schema(a) for a in args if a is not type(None)]
        schema = inner[0] if len(inner) == 1 else {"anyOf": inner}
        if type(None) in args:
            if set(schema) == {"type"}:
                return {"type": [schema["type"], "null"]}
            return {"anyOf": [schema, {"type": "null"}]}
        return schema
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (list, tuple):
        return {"type": "array", "items": type_schema(args[0])}
    if origin is dict:
        return {"type": "object", "additionalProperties": type_schema(args[1])}
    if dataclasses.is_dataclass(tp):
        return dataclass_schema(tp)
    if tp is dict:
        return {"type": "object"}
    simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if tp in simple:
        return {"type": simple[tp]}
    if tp is Any:
        return {}
    raise TypeError(f"no JSON-Schema for {tp!r}")


def dataclass_schema(cls: type, partial: bool = False, exclude: tuple[str, ...] = ()) -> dict:
    """The object schema of a config dataclass: every field with its description and default;
    fields without a default are required (none are, in a `partial` block)."""
    hints = typing.get_type_hints(cls)
    props, required = {}, []
    for f in dataclasses.fields(cls):
        if f.name in exclude or not f.init or f.metadata.get("internal"):
            continue
        meta = f.metadata
        sub = meta.get("partial")
        if sub is not None:
            schema = dataclass_schema(sub, partial=True, exclude=meta["exclude"])
            if meta["per_name"]:
                schema = {"type": "object", "additionalProperties": schema}
        else:
            schema = type_schema(hints[f.name])
        schema = {**schema, **meta.get("schema", {})}
        if meta.get("help"):
            schema["description"] = meta["help"]
        default = _default_of(f)
        if default is dataclasses.MISSING:
            required.append(f.name)
        elif not partial:
            schema["default"] = plain(default)
        props[f.name] = schema
    out = {"type": "object", "additionalProperties": False, "properties": props}
    if required and not partial:
        out["required"] = required
    return out


def _validator(schema: dict):
    import jsonschema

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine_many({
        "integer": lambda _, v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda _, v: (isinstance(v, (int, float)) and not isinstance(v, bool)
                                and math.isfinite(v)),
    })
    return jsonschema.validators.extend(base, type_checker=checker)(schema)


def validate(raw: dict, schema: dict, what: str = "config") -> None:
    """Raise ConfigError naming the first offending key (`what: a.b.c: message`)."""
    errors = sorted(_validator(schema).iter_errors(raw), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        err = errors[0]
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        message = err.message
        if err.validator == "pattern" and err.validator_value == NAME_PATTERN:
            message = (f"{err.instance!r} is not a plain name (letters, digits, _, - and ., "
                       "not starting with .): it becomes part of a path")
        elif err.validator == "uniqueItems" and isinstance(err.instance, list):
            seen: list = []
            twice = next((v for v in err.instance if v in seen or seen.append(v)), None)
            message = f"{twice!r} is listed twice (each entry names runs or jobs)"
        if err.validator == "type" and isinstance(err.instance, float) and not math.isfinite(err.instance):
            message = f"{err.instance} is not a finite number"
        raise ConfigError(f"{what}: {where}: {message}")


def coerce(raw: Any, schema: dict) -> Any:
    """Turn strings into the numbers or booleans the schema expects, recursively.

    Snakemake hands nested `--config` values over as strings (`seeds=[0,1]` arrives as
    `['0', '1']`), and PyYAML reads `1e-4` (no dot) as a string; both mean the number.
    Anything that does not parse is left alone for `validate` to name.
    """
    if isinstance(raw, dict) and schema.get("type") == "object":
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        return {k: coerce(v, props.get(k, extra if isinstance(extra, dict) else {}))
                for k, v in raw.items()}
    if isinstance(raw, list) and isinstance(schema.get("items"), dict):
        return [coerce(v, schema["items"]) for v in raw]
    if isinstance(raw, str):
        types_ = schema.get("type")
        types_ = types_ if isinstance(types_, list) else [types_]
        for kind, parse in (("integer", int), ("number", float)):
            if kind in types_:
                try:
                    return parse(raw)
                except ValueError:
                    pass
        if "boolean" in types_ and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        if "null" in types_ and raw.lower() in ("null", "none", "~"):
            return None
        enum = schema.get("enum")
        if enum and raw not in enum:
            for value in enum:
                if str(value) == raw:
                    return value
    return raw
