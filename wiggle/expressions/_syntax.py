"""CEL's expression grammar, parsed from _static's tokens into a small tree, and written back
out as source. Pure: no I/O, no CEL library.

The server's library (cel-expr-python) evaluates source text only and has no hook into an
evaluation, so the profile's size budget (_sizing) is enforced by rewriting an expression's
tree, after CEL has checked the original, and handing the library the rewritten source. The
tree keeps what the rewrite needs: which node is an operator, a call, a literal or a macro.
The grammar (cel-spec's langdef.md), loosest first:

    expr    = or ["?" or ":" expr]
    or      = and {"||" and}
    and     = rel {"&&" rel}
    rel     = add {("<" | "<=" | ">=" | ">" | "==" | "!=" | "in") add}
    add     = mul {("+" | "-") mul}
    mul     = unary {("*" | "/" | "%") unary}
    unary   = member | "!" {"!"} member | "-" {"-"} member
    member  = primary {"." IDENT ["(" [args] ")"] | "[" expr "]"}
    primary = ["."] IDENT ["(" [args] ")"] | "(" expr ")" | "[" [args] [","] "]"
            | "{" [entries] [","] "}" | literal
"""

from __future__ import annotations

from dataclasses import dataclass

from wiggle.expressions._static import Token, tokens

__all__ = [
    "Binary",
    "Call",
    "Conditional",
    "Ident",
    "Index",
    "ListLiteral",
    "Literal",
    "MapLiteral",
    "Node",
    "Select",
    "SyntaxProblem",
    "Unary",
    "parse",
    "write",
]


class SyntaxProblem(Exception):
    """The source is not an expression this grammar reads (CEL refuses it too)."""


@dataclass(frozen=True)
class Literal:
    text: str  # as written: 12, 1.5e3, "s", r'raw', true, null


@dataclass(frozen=True)
class Ident:
    name: str
    rooted: bool = False  # written `.name`: resolved from the root scope


@dataclass(frozen=True)
class Select:
    operand: Node
    field: str  # as written, a name or a `quoted name`


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Node, ...]
    target: Node | None = None  # `target.name(args)`; None for a global call


@dataclass(frozen=True)
class Index:
    operand: Node
    index: Node


@dataclass(frozen=True)
class ListLiteral:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class MapLiteral:
    entries: tuple[tuple[Node, Node], ...]


@dataclass(frozen=True)
class Unary:
    op: str  # "!" or "-"
    operand: Node


@dataclass(frozen=True)
class Binary:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Conditional:
    test: Node
    then: Node
    otherwise: Node


Node = (
    Literal
    | Ident
    | Select
    | Call
    | Index
    | ListLiteral
    | MapLiteral
    | Unary
    | Binary
    | Conditional
)

_RELATIONS = ("<", "<=", ">=", ">", "==", "!=", "in")
_LITERAL_WORDS = ("true", "false", "null")


def parse(source: str) -> Node:
    """The tree of `source`; SyntaxProblem when it is not an expression."""
    return _Parser(list(tokens(source))).whole()


class _Parser:
    def __init__(self, toks: list[Token]) -> None:
        self.toks = toks
        self.at = 0

    def whole(self) -> Node:
        node = self.expr()
        if self.at != len(self.toks):
            raise SyntaxProblem(f"unexpected {self.toks[self.at].text!r}")
        return node

    def peek(self) -> Token | None:
        return self.toks[self.at] if self.at < len(self.toks) else None

    def accept(self, *texts: str) -> str | None:
        tok = self.peek()
        if tok is not None and tok.kind in ("punct", "ident") and tok.text in texts:
            self.at += 1
            return tok.text
        return None

    def expect(self, text: str) -> None:
        if self.accept(text) is None:
            raise SyntaxProblem(f"expected {text!r}")

    def expr(self) -> Node:
        test = self.binary(0)
        if self.accept("?"):
            then = self.binary(0)
            self.expect(":")
            return Conditional(test, then, self.expr())
        return test

    # Binary levels, loosest first; each is left-associative.
    _LEVELS: tuple[tuple[str, ...], ...] = (
        ("||",),
        ("&&",),
        _RELATIONS,
        ("+", "-"),
        ("*", "/", "%"),
    )

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        while (op := self.accept(*self._LEVELS[level])) is not None:
            node = Binary(op, node, self.binary(level + 1))
        return node

    def unary(self) -> Node:
        op = self.accept("!", "-")
        if op is not None:
            return Unary(op, self.unary())
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while True:
            if self.accept("."):
                name = self.name()
                called = self.accept("(") is not None
                node = Call(name, self.args(")"), node) if called else Select(node, name)
            elif self.accept("["):
                node = Index(node, self.expr())
                self.expect("]")
            else:
                return node

    def name(self) -> str:
        tok = self.peek()
        if tok is None or tok.kind not in ("ident", "quoted"):
            raise SyntaxProblem("expected a name")
        self.at += 1
        return tok.text

    def args(self, close: str) -> tuple[Node, ...]:
        items: list[Node] = []
        while self.accept(close) is None:
            items.append(self.expr())
            if self.accept(",") is None:
                self.expect(close)
                break
        return tuple(items)

    def primary(self) -> Node:
        tok = self.peek()
        if tok is None:
            raise SyntaxProblem("the expression ends too early")
        if tok.kind in ("number", "string") or tok.text in _LITERAL_WORDS:
            self.at += 1
            return Literal(tok.text)
        rooted = self.accept(".") is not None
        tok = self.peek()
        if tok is not None and tok.kind == "ident":
            self.at += 1
            if self.accept("("):
                return Call(tok.text, self.args(")"))
            return Ident(tok.text, rooted)
        if rooted:
            raise SyntaxProblem("expected a name after '.'")
        if self.accept("("):
            node = self.expr()
            self.expect(")")
            return node
        if self.accept("["):
            return ListLiteral(self.args("]"))
        if self.accept("{"):
            return MapLiteral(self.entries())
        raise SyntaxProblem(f"unexpected {tok.text!r}" if tok else "unexpected end")

    def entries(self) -> tuple[tuple[Node, Node], ...]:
        out: list[tuple[Node, Node]] = []
        while self.accept("}") is None:
            key = self.expr()
            self.expect(":")
            out.append((key, self.expr()))
            if self.accept(",") is None:
                self.expect("}")
                break
        return tuple(out)


# How tightly each kind of node binds, loosest first (the grammar's levels).
_CONDITIONAL, _OR, _AND, _RELATION, _ADD, _MUL, _UNARY, _MEMBER = range(8)
_BINARY = {
    "||": _OR,
    "&&": _AND,
    **{op: _RELATION for op in _RELATIONS},
    **{op: _ADD for op in ("+", "-")},
    **{op: _MUL for op in ("*", "/", "%")},
}


def write(node: Node, tightest: int = _CONDITIONAL) -> str:
    """Source for `node` that CEL parses back to the same tree: literals and names exactly as
    written, parentheses only where the grammar needs them (CEL's parser limits how deeply an
    expression nests, parentheses included). `tightest`: how tightly the place `node` is
    written into binds."""
    text, binds = _written(node)
    return f"({text})" if binds < tightest else text


def _written(node: Node) -> tuple[str, int]:
    match node:
        case Literal(text):
            # `1.size()` would read as a float: a number is bare only where it cannot be a target.
            return text, _MEMBER if text[-1:] in ("'", '"') or text.isalpha() else _UNARY
        case Ident(name, rooted):
            return (f".{name}" if rooted else name), _MEMBER
        case Select(operand, field):
            return f"{write(operand, _MEMBER)}.{field}", _MEMBER
        case Call(name, args, None):
            return f"{name}({_list(args)})", _MEMBER
        case Call(name, args, target):
            assert target is not None
            return f"{write(target, _MEMBER)}.{name}({_list(args)})", _MEMBER
        case Index(operand, index):
            return f"{write(operand, _MEMBER)}[{write(index)}]", _MEMBER
        case ListLiteral(items):
            return f"[{_list(items)}]", _MEMBER
        case MapLiteral(entries):
            return "{" + ", ".join(f"{write(k)}: {write(v)}" for k, v in entries) + "}", _MEMBER
        case Unary(op, Unary("-", Literal(text)) as negative) if text[:1].isdigit():
            # `-9223372036854775808` is one literal; `--9223372036854775808` is not.
            return f"{op}({write(negative)})", _UNARY
        case Unary(op, operand):
            return f"{op}{write(operand, _UNARY)}", _UNARY
        case Binary(op, left, right):
            level = _BINARY[op]
            return f"{write(left, level)} {op} {write(right, level + 1)}", level
        case Conditional(test, then, otherwise):
            return f"{write(test, _OR)} ? {write(then, _OR)} : {write(otherwise)}", _CONDITIONAL
    raise AssertionError(f"not a node: {node!r}")


def _list(nodes: tuple[Node, ...]) -> str:
    return ", ".join(write(n) for n in nodes)
