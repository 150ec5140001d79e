"""The profile's run-time limits (docs/expressions.md, "Limits"), as a rewrite of an expression's
tree. Pure: no I/O, no CEL library.

The server's library (cel-expr-python) has no hook into an evaluation and cannot be stopped from
outside one, so everything the limits need happens through calls the rewrite puts into the tree:

- The size budget: the strings, lists and maps an evaluation makes count by their size (a
  string's code points, a list's elements, a map's entries) against SIZE_BUDGET. Every such
  value passes through a counting call,

      cel.bind(__wiggle_N, dyn(VALUE), <sized> ? wiggle_count(size(__wiggle_N)) ? __wiggle_N
                                                                          : __wiggle_N
                                          : __wiggle_N)

  and `replace` and `join` become `wiggle_replace` and `wiggle_join`, which count the size of
  their result before they make it.
- The time limit, and a stop once a budget is spent: every comprehension's step asks
  `wiggle_live()` first (`l.all(x, p)` becomes `l.all(x, wiggle_live() && p)`, `exists` takes
  `!wiggle_live() || p`, `map(x, f)` becomes `map(x, wiggle_live(), f)`). While the evaluation
  may go on the guard changes nothing; once it may not, `all` and `exists` stop at that step and
  `map`, `filter` and `exists_one` do nothing more than the guard in each remaining one, and the
  evaluator fails the evaluation. A spent budget's counting call raises, but the library turns
  that into an error value that a comprehension carries on past, so without the guard a loop
  would go on making and reading to its end.
- Linear string functions: `contains`, `indexOf`, `lastIndexOf` and `split` become
  `wiggle_contains`, `wiggle_index_of`, `wiggle_last_index_of` and `wiggle_split`, the
  evaluator's own on Python's linear string search (the library's are quadratic in the worst
  case, and one call outside any loop could hold an evaluation for minutes).

`__wiggle_` names cannot clash with an expression's own: the static rules refuse identifiers
that begin with two underscores, and functions outside the profile.
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

__all__ = [
    "CHUNK",
    "CHUNKS",
    "CONTAINS",
    "COUNT",
    "INDEX_OF",
    "JOIN",
    "LAST_INDEX_OF",
    "LIVE",
    "REPLACE",
    "SIZE_BUDGET",
    "SPLIT",
    "counted",
]

#: The sizes (code points, elements, entries) one evaluation may make in all.
SIZE_BUDGET = 4_194_304

COUNT = "wiggle_count"
REPLACE = "wiggle_replace"
JOIN = "wiggle_join"
LIVE = "wiggle_live"
CHUNKS = "wiggle_chunks"

#: map and filter over a longer list run in runs of this many elements (`_Rewrite.linear`).
CHUNK = 100
#: The most runs a list within the iteration budget can have.
CHUNKS_AT_MOST = 100
CONTAINS = "wiggle_contains"
INDEX_OF = "wiggle_index_of"
LAST_INDEX_OF = "wiggle_last_index_of"
SPLIT = "wiggle_split"

#: The string functions that become the evaluator's own, linear in their strings, by arity
#: (target excluded).
_LINEAR = {
    "contains": (CONTAINS, (1,)),
    "indexOf": (INDEX_OF, (1, 2)),
    "lastIndexOf": (LAST_INDEX_OF, (1, 2)),
    "split": (SPLIT, (1, 2)),
}

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
                test = body[0] if len(body) == 2 else None
                made = self.linear(var, self.visit(target), test, self.strings_of(body[-1]))
            else:
                made = self.linear(var, self.visit(target), body[0], None)
            return self.count(made, _any_size)
        if target is not None and name in ("all", "exists", "exists_one") and len(node.args) == 2:
            var, test = node.args
            visited = self.visit(test)
            if name == "exists":  # stops at its first true: a stopped guard says true
                guarded: Node = Binary("||", Unary("!", _LIVE), visited)
            else:  # all stops at its first false; exists_one only does nothing more
                guarded = _guarded(visited)
            return Call(name, (var, guarded), self.visit(target))
        args = tuple(self.visit(a) for a in node.args)
        visited_target = None if target is None else self.visit(target)
        if visited_target is not None and name == "replace" and len(args) in (2, 3):
            return Call(REPLACE, (visited_target, *args))
        if visited_target is not None and name == "join" and len(args) in (0, 1):
            return Call(JOIN, (visited_target, *args))
        made = Call(name, args, visited_target)
        if visited_target is not None and name in _LINEAR and len(args) in _LINEAR[name][1]:
            made = Call(_LINEAR[name][0], (visited_target, *args))
        if visited_target is not None and name in _MAKERS:
            return self.count(made, _any_size)
        return made

    def linear(self, var: Node, items: Node, test: Node | None, make: Node | None) -> Node:
        """`items.map(var, test, make)` (`filter` when `make` is None: the element itself), in
        time linear in the list's length.

        The library builds a map's or filter's list one element at a time, copying what it has
        so far at every step: 10,000 elements take it about 6 seconds. So a list longer than
        CHUNK is cut into runs of CHUNK indices (`wiggle_chunks`), each run mapped on its own
        (its copies bounded by CHUNK), and the runs joined by a balanced sum of at most
        CHUNKS_AT_MOST terms. The iteration budget caps a list at 10,000 elements, and the runs'
        own comprehension adds one iteration per run. A map's key range and a short list take
        the library's own form."""
        every, runs, run, index = (Ident(f"__wiggle_{next(self.numbers)}") for _ in range(4))

        def on(element: Node, node: Node | None) -> Node | None:
            return None if node is None else Call("bind", (var, element, node), Ident("cel"))

        plain = Call("map", (var, _guarded(test), make or var), every)
        element = Index(every, index)
        per_run = Call(
            "map", (index, _guarded(on(element, test)), on(element, make) or element), run
        )
        all_runs = Call("map", (run, per_run), Call(CHUNKS, (Call("size", (every,)),)))
        joined = _balanced_sum(
            [
                Conditional(
                    Binary(">", Call("size", (runs,)), Literal(str(k))),
                    Index(runs, Literal(str(k))),
                    ListLiteral(()),
                )
                for k in range(CHUNKS_AT_MOST)
            ]
        )
        short = Binary(
            "||",
            Binary("!=", Call("type", (every,)), Ident("list")),
            Binary("<=", Call("size", (every,)), Literal(str(CHUNK))),
        )
        chunked = Call("bind", (runs, all_runs, joined), Ident("cel"))
        # dyn(): the checker would refuse indexing a range it knows is a map by an int.
        bound = Call("dyn", (items,))
        return Call("bind", (every, bound, Conditional(short, plain, chunked)), Ident("cel"))

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


_LIVE = Call(LIVE, ())


def _balanced_sum(terms: list[Node]) -> Node:
    """`a + b + ...` as a balanced tree: CEL's parser limits how deeply an expression nests, and
    a chain of a hundred terms nests a hundred deep."""
    if len(terms) == 1:
        return terms[0]
    middle = len(terms) // 2
    return Binary("+", _balanced_sum(terms[:middle]), _balanced_sum(terms[middle:]))


def _guarded(test: Node | None) -> Node:
    """A comprehension step's test, asked only while the evaluation may go on."""
    return _LIVE if test is None else Binary("&&", _LIVE, test)


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
