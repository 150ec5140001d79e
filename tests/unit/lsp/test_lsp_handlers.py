"""Registration calls found in each SDK's form (wiggle.lsp._handlers), and none elsewhere."""

from __future__ import annotations

from wiggle.lsp._handlers import language_of, scan


def _found(language: str, text: str) -> list[tuple[str, str, int, int, int, int]]:
    return [
        (r.name, r.kind, r.line, r.column, r.target_line, r.target_column)
        for r in scan(language, text)
    ]


def test_python_decorators_and_register_calls() -> None:
    text = (
        "from wiggle import activity\n"
        "@activity\n"
        "def validate(ctx):\n"
        "    return ctx\n"
        "@registry.activity('in_stock')\n"
        "async def check(ctx) -> bool:\n"
        "    return True\n"
        "registry.register(notify, name='notify_customer')\n"
        "atexit.register(cleanup)\n"
        "def notify(ctx): ...\n"
    )
    assert _found("python", text) == [
        ("validate", "activity", 3, 5, 3, 5),
        ("in_stock", "predicate", 5, 20, 6, 11),
        ("notify_customer", "activity", 8, 32, 10, 5),
    ]


def test_a_python_file_that_does_not_parse_is_read_by_pattern() -> None:
    text = '@activity("refund")\ndef refund(ctx:\n'
    assert _found("python", text) == [("refund", "activity", 1, 11, 2, 5)]


def test_go_java_and_typescript_calls_with_their_functions() -> None:
    go = (
        '// w.Register("commented", x)\n'
        "func f(w worker.Worker) {\n"
        '\tw.Register("charge", charge)\n'
        "\tw.RegisterPredicate(`big`, func(c context.Context, in []byte) (bool, error) {})\n"
        "}\n"
        "func charge(c context.Context, in []byte) ([]byte, error) { return in, nil }\n"
    )
    assert _found("go", go) == [
        ("charge", "activity", 3, 13, 6, 6),
        ("big", "predicate", 4, 22, 4, 22),
    ]
    java = (
        'b.register("reserve", (c, s) -> c)\n'
        ' .registerPredicate("has_stock", Stock::hasStock);\n'
        "static boolean hasStock(JsonNode c, Step s) { return true; }\n"
    )
    assert _found("java", java) == [
        ("reserve", "activity", 1, 12, 1, 12),
        ("has_stock", "predicate", 2, 21, 3, 16),
    ]
    ts = (
        'new Worker({ activities: { merge, "print-label": label }, predicates: { big: f } })\n'
        "  .activity('validate', validate);\n"
        "function validate(o) { return o; }\n"
        "const label = (c) => c;\n"
    )
    assert _found("typescript", ts) == [
        ("validate", "activity", 2, 13, 3, 10),
        ("merge", "activity", 1, 28, 1, 28),
        ("print-label", "activity", 1, 35, 4, 7),
        ("big", "predicate", 1, 73, 1, 73),  # f is not declared here: the key itself
    ]


def test_languages_by_suffix() -> None:
    assert [
        language_of(p) for p in ("a.py", "b.go", "C.java", "d.ts", "e.mjs", "f.d.ts", "g.rs")
    ] == [
        "python",
        "go",
        "java",
        "typescript",
        "typescript",
        None,
        None,
    ]
