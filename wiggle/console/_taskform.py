"""A human task's form drawn from its JSON Schema, and the answer built back from what was
typed (docs/console.md#the-tasks-pages).

    root = form_fields(task.form, typed)        # the fields to draw (typed: the values kept)
    answer, problems = answer_from(task.form, form)   # the JSON answer the form fields make

What is drawn, per property of an object schema (the root must be one; anything else gets the
JSON editor for the whole answer):

- `type: string`: one line when `maxLength` is at most 120, else several; `format: date` a date
  picker, `email` and `uri` their own inputs;
- `type: number` / `integer`: a number input with `minimum` / `maximum`;
- `type: boolean`: a required one Yes / No (nothing chosen until the person chooses), else a
  checkbox;
- `enum`, or a `oneOf` / `anyOf` of `const`s (with their `title`s): a choice, radio buttons up to
  4 options, else a list;
- `type: object` with `properties`: a fieldset of its own fields;
- `type: array` of an `enum`: a checkbox per option; of strings or numbers: one value per line;
- anything else (`$ref`, a `oneOf` of shapes, an array of objects, no type...): a JSON editor for
  that value.

`title` is the label (else the key), `description` the help under it, `default` the value shown
first, `required` marks the field. Keywords that only check (`pattern`, `if` / `then`,
`minLength`, ...) are left to the validator: the engine checks the answer against the whole
schema when the task is completed, and a refusal comes back with the validator's message.

Each value is converted to the type its schema names (a number typed where a number is asked
is sent as a number); what cannot be converted is sent as typed, so that the validator's own
message says what is wrong with it. An empty field is left out of the answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from jsonschema.validators import validator_for  # type: ignore[import-untyped,unused-ignore]

__all__ = [
    "ANSWER",
    "REQUIRED",
    "Choice",
    "Field",
    "answer_from",
    "field_problems",
    "form_fields",
]

#: The name of the root value's field; a property's field is named ANSWER + its JSON pointer.
ANSWER = "answer"
#: A string field with a maxLength above this (or none) is drawn as several lines.
ONE_LINE_MAX = 120
#: What a field missing from an answer that needs it says.
REQUIRED = "Required with this answer."
#: Up to this many options are radio buttons; more are a list.
RADIO_MAX = 4

_SCALARS = ("string", "number", "integer", "boolean")
_FORMATS = {"date": "date", "email": "email", "uri": "url"}


@dataclass(frozen=True)
class Choice:
    value: str  # the option's value as JSON text (what the form sends back)
    label: str


@dataclass
class Field:
    """A value of the answer and how it is drawn. `widget` is one of: fieldset, text,
    textarea, date, email, url, number, integer, checkbox, yesno, radio, select, multi, lines,
    json."""

    pointer: str  # JSON pointer of the value in the answer ("" for the root)
    label: str
    widget: str
    required: bool = False
    help: str = ""
    attrs: dict[str, str] = field(default_factory=dict)  # min, max, step, maxlength
    choices: list[Choice] = field(default_factory=list)
    children: list[Field] = field(default_factory=list)
    value: str = ""  # what the field shows (one line of text, a JSON text, "true"/"false")
    values: list[str] = field(default_factory=list)  # a `multi` field's checked options
    problems: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return ANSWER + self.pointer

    @property
    def dom_id(self) -> str:
        """An id for the field's element: `field-` and the pointer's keys joined with `.`."""
        keys = _keys(self.pointer)
        safe = ".".join("".join(c if c.isalnum() or c in "-_" else "_" for c in k) for k in keys)
        return "field-" + (safe or "answer")

    def walk(self) -> list[Field]:
        out = [self]
        for child in self.children:
            out.extend(child.walk())
        return out


def _pointer(parent: str, key: str) -> str:
    return parent + "/" + key.replace("~", "~0").replace("/", "~1")


def _keys(pointer: str) -> list[str]:
    """The keys a JSON pointer names, unescaped."""
    return [k.replace("~1", "/").replace("~0", "~") for k in pointer.split("/")[1:]]


def _label(schema: Mapping[str, Any], key: str) -> str:
    title = schema.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    text = key.replace("_", " ").replace("-", " ").strip()
    return text[:1].upper() + text[1:] if text else "Answer"


def _type(schema: Mapping[str, Any]) -> str | None:
    """The one type the schema names (`["string", "null"]` counts as string), else None."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    return kind if isinstance(kind, str) else None


def _choices(schema: Mapping[str, Any]) -> list[Choice] | None:
    """The options of an `enum`, or of a `oneOf` / `anyOf` whose every branch is a `const`."""
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return [Choice(_json(v), _option_label(v)) for v in schema["enum"]]
    for key in ("oneOf", "anyOf"):
        branches = schema.get(key)
        if (
            isinstance(branches, list)
            and branches
            and all(isinstance(b, Mapping) and "const" in b for b in branches)
        ):
            return [
                Choice(_json(b["const"]), _label(b, _option_label(b["const"]))) for b in branches
            ]
    return None


def _option_label(value: Any) -> str:
    return value if isinstance(value, str) else _json(value)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _typed(values: Mapping[str, Sequence[str]] | None, name: str) -> list[str] | None:
    if values is None or name not in values:
        return None
    return list(values[name])


def _shown(schema: Mapping[str, Any], widget: str) -> str:
    """The value a field shows before anything is typed: its `default`."""
    if "default" not in schema:
        return ""
    default = schema["default"]
    if widget in ("radio", "select", "json"):
        return _json(default)
    if widget in ("checkbox", "yesno"):
        return "true" if default is True else "false" if default is False else ""
    if widget == "lines" and isinstance(default, list):
        return "\n".join(str(v) for v in default)
    return "" if isinstance(default, dict | list) else str(default)


def _scalar_field(
    schema: Mapping[str, Any], pointer: str, label: str, required: bool, kind: str
) -> Field:
    f = Field(pointer, label, "text", required)
    if kind == "string":
        fmt = schema.get("format")
        max_length = schema.get("maxLength")
        if isinstance(fmt, str) and fmt in _FORMATS:
            f.widget = _FORMATS[fmt]
        elif isinstance(max_length, int) and max_length <= ONE_LINE_MAX:
            f.widget = "text"
        else:
            f.widget = "textarea"
        if isinstance(max_length, int):
            f.attrs["maxlength"] = str(max_length)
    elif kind in ("number", "integer"):
        f.widget = kind
        f.attrs["step"] = "1" if kind == "integer" else "any"
        for keyword, attr in (("minimum", "min"), ("maximum", "max")):
            bound = schema.get(keyword)
            if isinstance(bound, int | float) and not isinstance(bound, bool):
                f.attrs[attr] = str(bound)
    else:  # boolean
        f.widget = "yesno" if required else "checkbox"
    return f


def _field(
    schema: Any,
    pointer: str,
    key: str,
    required: bool,
    typed: Mapping[str, Sequence[str]] | None,
) -> Field:
    if not isinstance(schema, Mapping):  # `true`, `{}`-like booleans: anything goes
        schema = {}
    label = _label(schema, key)
    kind = _type(schema)
    choices = _choices(schema)
    if choices is not None:
        f = Field(pointer, label, "radio" if len(choices) <= RADIO_MAX else "select", required)
        f.choices = choices
    elif kind == "object" and isinstance(schema.get("properties"), Mapping):
        f = Field(pointer, label, "fieldset", required)
        needed = schema.get("required") if isinstance(schema.get("required"), list) else []
        for name, sub in schema["properties"].items():
            f.children.append(_field(sub, _pointer(pointer, name), name, name in needed, typed))
    elif kind in _SCALARS:
        f = _scalar_field(schema, pointer, label, required, kind)
    elif kind == "array" and isinstance(schema.get("items"), Mapping):
        items = schema["items"]
        options = _choices(items)
        if options is not None:
            f = Field(pointer, label, "multi", required, choices=options)
        elif _type(items) in ("string", "number", "integer"):
            f = Field(pointer, label, "lines", required)
        else:
            f = Field(pointer, label, "json", required)
    else:
        f = Field(pointer, label, "json", required)
    description = schema.get("description")
    f.help = description.strip() if isinstance(description, str) else ""
    if f.widget == "json" and not f.help:
        f.help = "A JSON value."
    if f.widget == "lines" and not f.help:
        f.help = "One value per line."
    if f.widget != "fieldset":
        shown = _typed(typed, f.name)
        if f.widget == "multi":
            f.values = shown if shown is not None else _default_list(schema)
        elif shown is not None:
            f.value = shown[0] if shown else ""
        elif typed is not None and f.widget == "checkbox":
            f.value = ""  # a checkbox left unticked sends nothing
        else:
            f.value = _shown(schema, f.widget)
    return f


def _default_list(schema: Mapping[str, Any]) -> list[str]:
    default = schema.get("default")
    return [_json(v) for v in default] if isinstance(default, list) else []


def form_fields(form: Any, typed: Mapping[str, Sequence[str]] | None = None) -> Field:
    """The fields of a task's form; `typed`: what the person sent (field name -> values), kept
    when the answer is refused."""
    schema = form if isinstance(form, Mapping) else {}
    if _type(schema) == "object" and isinstance(schema.get("properties"), Mapping):
        root = _field(schema, "", "", True, typed)
        root.label = ""
        return root
    root = Field("", "Answer", "json", True, help="The answer as JSON.")
    shown = _typed(typed, root.name)
    root.value = shown[0] if shown else _shown(schema, "json")
    return root


# -- the answer -------------------------------------------------------------------------------

_OMIT = object()


def _number(text: str, integer: bool) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        return text  # sent as typed: the validator says it is not a number
    if value != value or value in (float("inf"), float("-inf")):
        return text
    if integer:
        return int(value) if value.is_integer() else value
    return value


def _convert_line(text: str, kind: str | None) -> Any:
    if kind in ("number", "integer"):
        return _number(text, kind == "integer")
    return text


def _value(f: Field, form: Mapping[str, Sequence[str]], problems: list[str], item: Any) -> Any:
    sent = list(form.get(f.name, ()))
    first = sent[0] if sent else ""
    if f.widget == "checkbox":
        return bool(sent)
    if f.widget == "multi":
        chosen = [orjson.loads(v) for v in sent if v in {c.value for c in f.choices}]
        return chosen if chosen or f.required else _OMIT
    if f.widget == "lines":
        lines = [line.strip() for line in first.splitlines() if line.strip()]
        if not lines:
            return [] if f.required else _OMIT
        return [_convert_line(line, item) for line in lines]
    if not first.strip():
        return _OMIT
    if f.widget == "yesno":
        return {"true": True, "false": False}.get(first, first)
    if f.widget in ("radio", "select"):
        return orjson.loads(first) if first in {c.value for c in f.choices} else first
    if f.widget in ("number", "integer"):
        return _number(first.strip(), f.widget == "integer")
    if f.widget == "json":
        try:
            return orjson.loads(first)
        except orjson.JSONDecodeError as exc:
            problems.append(f"{f.label}: not valid JSON ({exc})")
            return _OMIT
    return first


def _item_types(form: Any, f: Field) -> Any:
    """The item type of a `lines` field's array, read from the schema at its pointer."""
    schema = form
    for key in _keys(f.pointer):
        properties = schema.get("properties") if isinstance(schema, Mapping) else None
        schema = properties.get(key, {}) if isinstance(properties, Mapping) else {}
    items = schema.get("items") if isinstance(schema, Mapping) else None
    return _type(items) if isinstance(items, Mapping) else None


def answer_from(form: Any, sent: Mapping[str, Sequence[str]]) -> tuple[Any, list[str]]:
    """The answer the form's fields make (converted per the schema), and what the console
    itself cannot read (a JSON field that is not JSON). An answer with no value is null for a
    form that is not an object, else `{}`."""
    root = form_fields(form)
    problems: list[str] = []
    if root.widget == "json":
        got = _value(root, sent, problems, None)
        return (None if got is _OMIT else got), problems
    return _build(form, root, sent, problems), problems


def _build(form: Any, f: Field, sent: Mapping[str, Sequence[str]], problems: list[str]) -> Any:
    if f.widget != "fieldset":
        item = _item_types(form, f) if f.widget == "lines" else None
        return _value(f, sent, problems, item)
    out: dict[str, Any] = {}
    for child in f.children:
        got = _build(form, child, sent, problems)
        if got is not _OMIT:
            out[_keys(child.pointer)[-1]] = got
    return out if out or f.required or not f.pointer else _OMIT


def field_problems(form: Any, answer: Any) -> dict[str, list[str]]:
    """Every way `answer` fails the form, by the JSON pointer of the field it is about: a
    missing required property is the missing field's, anything else the value's own."""
    if not isinstance(form, Mapping | bool):
        return {}
    try:
        validator = validator_for(form)(form)
        errors = list(validator.iter_errors(answer))
    except Exception:  # a form the engine accepted but this validator cannot run
        return {}
    found: dict[str, list[str]] = {}
    for error in errors:
        at = "".join(_pointer("", str(p)) for p in error.absolute_path)
        if error.validator == "required" and isinstance(error.instance, Mapping):
            for name in error.validator_value:
                if name not in error.instance:
                    found.setdefault(_pointer(at, name), []).append(REQUIRED)
            continue
        found.setdefault(at, []).append(error.message)
    return found
