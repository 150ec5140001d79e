"""The profile's size budget, as a rewrite of an expression's tree. Pure: no I/O, no CEL library.

docs/expressions.md ("Limits") says what counts: the strings, lists and maps an evaluation
makes, each by its size (a string's code points, a list's elements, a map's entries), against
SIZE_BUDGET per evaluation; `replace` and `join` count their result before they make it.

`counted` returns a tree in which every such value passes through a counting call:

    cel.bind(__wiggle_N, dyn(VALUE), <sized> ? wiggle_count(size(__wiggle_N)) ? __wiggle_N
                                                                        : __wiggle_N
                                        : __wiggle_N)

`wiggle_count(n)` is the evaluator's: it adds n to the evaluation's total and fails once the
total passes the budget. `replace` and `join` become `wiggle_replace` and `wiggle_join`, which
count the size of their result first. `__wiggle_` names cannot clash with an expression's own:
the static rules refuse identifiers that begin with two underscores.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from wiggle.expressions._syntax import (
    Binary,
    Call,
    Conditional,
    Ident,
    Index,
    ListLiteral,
    Literal,
    MapLiteral,
    Node,
    Select,
    Unary,
)

__all__ = ["COUNT", "JOIN", "REPLACE", "SIZE_BUDGET", "counted"]

#: The sizes (code points, elements, entries) one evaluation may make in all.
SIZE_BUDGET = 4_194_304

COUNT = "wiggle_count"
REPLACE = "wiggle_replace"
JOIN = "wiggle_join"

#: Member functions whose string or list result counts (replace and join are counted apart).
_MAKERS = frozenset({"lowerAscii", "upperAscii", "substring", "trim", "split"})


def counted(node: Node) -> Node:
    """`node` with the size budget's counting calls in it."""
    return _Rewrite(itertools.count(1)).visit(node)


class _Rewrite:
    def __init__(self, numbers: Iterator[int]) -> None:
        self.numbers = numbers

    def visit(self, node: Node) -> Node:
        match node:
            case Literal() | Ident():
                return node
            case Select(operand, field):
                return Select(self.visit(operand), field)
            case Index(operand, index):
                return Index(self.visit(operand), self.visit(index))
            case Unary(op, operand):
                return Unary(op, self.visit(operand))
            case Conditional(test, then, otherwise):
                return Conditional(self.visit(test), self.visit(then), self.visit(otherwise))
            case Binary("+", left, right):
                return self.sum(node)
            case Binary(op, left, right):
                return Binary(op, self.visit(left), self.visit(right))
            case ListLiteral() | MapLiteral() if _constant(node):
                # Its size is known from the text: count it without looking at the value.
                count = Call(COUNT, (Literal(str(_entries(node))),))
                return Conditional(count, node, node)
            case ListLiteral(items):
                return self.count(ListLiteral(tuple(self.strings(i) for i in items)), _any_size)
            case MapLiteral(entries):
                pairs = tuple((self.strings(k), self.strings(v)) for k, v in entries)
                return self.count(MapLiteral(pairs), _any_size)
            case Call():
                return self.call(node)
        raise AssertionError(f"not a node: {node!r}")

    def sum(self, node: Binary) -> Node:
        """`a + b + c` counted once, as a whole: a chain's every sum is smaller than its last,
        and one count for each would nest the rewrite past CEL's parser depth."""
        terms: list[Node] = []
        while isinstance(node, Binary) and node.op == "+":
            terms.append(node.right)
            node = node.left  # type: ignore[assignment]
        terms.append(node)
        terms.reverse()
        made: Node = self.visit(terms[0])
        for term in terms[1:]:
            made = Binary("+", made, self.visit(term))
        # A number literal in the chain: the sum is a number (or an error).
        if any(_is_number(t) for t in terms):
            return made
        return self.count(made, _any_size)

    def call(self, node: Call) -> Node:
        name, target = node.name, node.target
        if name == "has" and target is None:
            return node  # its argument is a field test, not a value
        if target is not None and name in ("map", "filter") and len(node.args) in (2, 3):
            var, *rest = node.args
            body = [self.visit(a) for a in rest]
            if name == "map":
                body[-1] = self.strings_of(body[-1])  # each element it makes
            macro = Call(name, (var, *body), self.visit(target))
            return self.count(macro, _any_size)
        if target is not None and name in ("all", "exists", "exists_one"):
            var, *rest = node.args
            return Call(name, (var, *(self.visit(a) for a in rest)), self.visit(target))
        args = tuple(self.visit(a) for a in node.args)
        visited_target = None if target is None else self.visit(target)
        if visited_target is not None and name == "replace" and len(args) in (2, 3):
            return Call(REPLACE, (visited_target, *args))
        if visited_target is not None and name == "join" and len(args) in (0, 1):
            return Call(JOIN, (visited_target, *args))
        made = Call(name, args, visited_target)
        if visited_target is not None and name in _MAKERS:
            return self.count(made, _any_size)
        return made

    def strings(self, node: Node) -> Node:
        """A literal's element: a string counts its length (an inner literal counts itself)."""
        if isinstance(node, ListLiteral | MapLiteral):
            return self.visit(node)
        return self.strings_of(self.visit(node))

    def strings_of(self, visited: Node) -> Node:
        if isinstance(visited, Literal) and visited.text[-1:] not in ("'", '"'):
            return visited  # a number, a bool or null
        return self.count(visited, _string_size)

    def count(self, value: Node, sized: Callable[[Node], Node]) -> Node:
        name = Ident(f"__wiggle_{next(self.numbers)}")
        charge = Conditional(Call(COUNT, (Call("size", (name,)),)), name, name)
        # dyn(): the checker would refuse size() of a value it knows is a number.
        bound = Call("dyn", (value,))
        return Call("bind", (name, bound, Conditional(sized(name), charge, name)), Ident("cel"))


def _constant(node: Node) -> bool:
    """A literal made of literals only."""
    match node:
        case Literal():
            return True
        case ListLiteral(items):
            return all(_constant(i) for i in items)
        case MapLiteral(entries):
            return all(_constant(k) and _constant(v) for k, v in entries)
    return False


def _entries(node: Node) -> int:
    """The entries of a constant literal, its inner literals' included."""
    match node:
        case ListLiteral(items):
            return len(items) + sum(_entries(i) for i in items)
        case MapLiteral(entries):
            return len(entries) + sum(_entries(k) + _entries(v) for k, v in entries)
    return 0


def _is_number(node: Node) -> bool:
    return isinstance(node, Literal) and (node.text[:1].isdigit() or node.text[:1] == ".")


def _type_is(name: Node, *types: str) -> Node:
    tests: list[Node] = [Binary("==", Call("type", (name,)), Ident(t)) for t in types]
    out = tests[0]
    for test in tests[1:]:
        out = Binary("||", out, test)
    return out


def _any_size(name: Node) -> Node:
    return _type_is(name, "string", "list", "map")


def _string_size(name: Node) -> Node:
    return _type_is(name, "string")
