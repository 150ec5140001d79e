"""A human task's form drawn from its JSON Schema, and the answer built back from the fields
(wiggle/console/_taskform.py), without a server."""

from __future__ import annotations

from typing import Any

from wiggle.console._taskform import REQUIRED, answer_from, field_problems, form_fields

FORM: dict[str, Any] = {
    "type": "object",
    "required": ["approved", "amount", "kind"],
    "properties": {
        "approved": {"type": "boolean", "title": "Approve?"},
        "urgent": {"type": "boolean", "default": True},
        "comment": {"type": "string", "maxLength": 2000, "description": "Why."},
        "reference": {"type": "string", "maxLength": 40},
        "contact": {"type": "string", "format": "email"},
        "pay_on": {"type": ["string", "null"], "format": "date"},
        "amount": {"type": "integer", "minimum": 1, "maximum": 100},
        "rate": {"type": "number", "exclusiveMinimum": 0},
        "kind": {"enum": ["goods", "services", 3]},
        "decision": {
            "oneOf": [{"const": "yes", "title": "Approve"}, {"const": "no", "title": "Reject"}]
        },
        "country": {"enum": ["DE", "FR", "IT", "NL", "PL"], "default": "FR"},
        "labels": {"type": "array", "items": {"enum": ["red", "blue"]}},
        "codes": {"type": "array", "items": {"type": "integer"}},
        "lines": {"type": "array", "items": {"type": "object"}},
        "ref": {"$ref": "#/$defs/x"},
        "cost_centre/a~b": {"type": "string", "maxLength": 10},
        "address": {
            "type": "object",
            "title": "Postal address",
            "required": ["city"],
            "properties": {"city": {"type": "string", "maxLength": 60}, "zip": {"type": "string"}},
        },
    },
    "$defs": {"x": {"type": "string"}},
}


def _fields(form: Any = FORM, typed: Any = None) -> dict[str, Any]:
    return {f.pointer: f for f in form_fields(form, typed).walk()}


def test_each_kind_of_value_gets_its_field():
    f = _fields()
    widgets = {pointer: field.widget for pointer, field in f.items()}
    assert widgets == {
        "": "fieldset",
        "/approved": "yesno",  # required: nothing is chosen until the person chooses
        "/urgent": "checkbox",
        "/comment": "textarea",  # long text
        "/reference": "text",
        "/contact": "email",
        "/pay_on": "date",
        "/amount": "integer",
        "/rate": "number",
        "/kind": "radio",
        "/decision": "radio",
        "/country": "select",  # more than four options
        "/labels": "multi",
        "/codes": "lines",
        "/lines": "json",  # an array of objects: the JSON fallback
        "/ref": "json",  # what the renderer cannot draw
        "/cost_centre~1a~0b": "text",
        "/address": "fieldset",
        "/address/city": "text",
        "/address/zip": "textarea",
    }
    assert [p for p, field in f.items() if field.required] == [
        "",
        "/approved",
        "/amount",
        "/kind",
        "/address/city",
    ]
    assert f["/approved"].label == "Approve?" and f["/reference"].label == "Reference"
    assert f["/address"].label == "Postal address" and f["/comment"].help == "Why."
    assert f["/amount"].attrs == {"step": "1", "min": "1", "max": "100"}
    assert f["/rate"].attrs == {"step": "any"}  # exclusive bounds are left to the validator
    assert f["/comment"].attrs == {"maxlength": "2000"}
    assert [(c.value, c.label) for c in f["/kind"].choices] == [
        ('"goods"', "goods"),
        ('"services"', "services"),
        ("3", "3"),
    ]
    assert [c.label for c in f["/decision"].choices] == ["Approve", "Reject"]
    assert f["/cost_centre~1a~0b"].name == "answer/cost_centre~1a~0b"
    assert f["/cost_centre~1a~0b"].dom_id == "field-cost_centre_a_b"
    assert f["/address/city"].dom_id == "field-address.city"


def test_the_defaults_are_shown_first_and_what_was_typed_after_a_refusal():
    f = _fields()
    assert f["/urgent"].value == "true" and f["/country"].value == '"FR"'
    assert f["/approved"].value == ""
    typed = {"answer/approved": ["false"], "answer/country": ['"PL"'], "answer/labels": ['"red"']}
    f = _fields(typed=typed)
    assert f["/approved"].value == "false" and f["/country"].value == '"PL"'
    assert f["/labels"].values == ['"red"']
    assert f["/urgent"].value == ""  # unticked when sent: a checkbox sends nothing


def test_the_answer_is_converted_to_the_types_the_schema_names():
    sent = {
        "answer/approved": ["true"],
        "answer/comment": ["two\nlines"],
        "answer/reference": [""],  # empty: left out
        "answer/amount": ["7.0"],
        "answer/rate": ["2.5"],
        "answer/kind": ["3"],
        "answer/decision": ['"no"'],
        "answer/labels": ['"red"', '"blue"', '"green"'],  # not an option: dropped
        "answer/codes": ["1\n 22 \n\nx"],
        "answer/lines": ['[{"sku": "A"}]'],
        "answer/cost_centre~1a~0b": ["CC-1"],
        "answer/address/city": ["Lyon"],
    }
    answer, problems = answer_from(FORM, sent)
    assert problems == []
    assert answer == {
        "approved": True,
        "urgent": False,
        "comment": "two\nlines",
        "amount": 7,
        "rate": 2.5,
        "kind": 3,
        "decision": "no",
        "labels": ["red", "blue"],
        "codes": [1, 22, "x"],  # "x" as typed: the validator says what is wrong with it
        "lines": [{"sku": "A"}],
        "cost_centre/a~b": "CC-1",
        "address": {"city": "Lyon"},
    }


def test_what_cannot_be_converted_is_sent_as_typed_and_json_that_is_not_json_is_a_problem():
    answer, problems = answer_from(FORM, {"answer/amount": ["lots"], "answer/ref": ["{oops"]})
    assert answer["amount"] == "lots"
    assert "ref" not in answer and "address" not in answer  # an optional object left empty
    assert len(problems) == 1 and problems[0].startswith("Ref: not valid JSON")


def test_a_form_that_is_not_an_object_is_one_json_value():
    root = form_fields({"type": "array", "items": {"type": "string"}})
    assert root.widget == "json" and root.name == "answer" and root.required
    assert answer_from({"type": "array"}, {"answer": ['["a"]']}) == (["a"], [])
    assert answer_from({"type": "array"}, {"answer": [""]}) == (None, [])
    assert form_fields(None).widget == "json"


def test_the_problems_are_told_by_field_a_missing_value_at_its_own():
    form = {
        **FORM,
        "if": {"properties": {"approved": {"const": False}}, "required": ["approved"]},
        "then": {"required": ["comment"]},
    }
    answer, _ = answer_from(form, {"answer/approved": ["false"], "answer/amount": ["500"]})
    problems = field_problems(form, answer)
    assert problems["/comment"] == [REQUIRED]  # required by the if / then
    assert problems["/kind"] == [REQUIRED]
    assert problems["/amount"] == ["500 is greater than the maximum of 100"]
    assert "/approved" not in problems
