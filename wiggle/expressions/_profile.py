"""The Wiggle CEL profile as data: what an expression may use and how large it may be.

docs/expressions.md is the normative text; every implementation (the server's, and each SDK's
for the local modes) holds these same lists, and the vectors in spec/conformance/expressions/
check that each one evaluates them alike.
"""

from __future__ import annotations

__all__ = [
    "COMPREHENSIONS",
    "FUNCTIONS",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "MAX_SOURCE_CHARS",
    "NAMESPACED_FUNCTIONS",
    "VARIABLES",
]

#: An expression longer than this (in code points) is refused at compile time.
MAX_SOURCE_CHARS = 2048

#: Brackets of any kind, (, [ and {, nested deeper than this are refused at compile time.
MAX_DEPTH = 24

#: The largest integer every implementation's JSON reads exactly (2^53 - 1): integral numbers
#: within ±this are CEL ints, any other number a double; an int result outside it is an error.
MAX_SAFE_INTEGER = 2**53 - 1

#: The variables in scope, each a CEL `dyn` (instance: a map).
VARIABLES = ("ctx", "instance")

#: The macros that iterate (a comprehension). One may not run inside another's arguments.
COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "map", "filter"})

#: Global and member functions an expression may call (operators are always allowed).
FUNCTIONS = frozenset(
    {
        # the standard library
        "has",
        "size",
        "contains",
        "startsWith",
        "endsWith",
        "int",
        "double",
        "string",
        "bool",
        "timestamp",
        "duration",
        "dyn",
        "getFullYear",
        "getMonth",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getHours",
        "getMinutes",
        "getSeconds",
        "getMilliseconds",
        # the strings extension
        "charAt",
        "indexOf",
        "lastIndexOf",
        "lowerAscii",
        "upperAscii",
        "replace",
        "split",
        "substring",
        "trim",
        "join",
    }
)

#: Functions called by a dotted name (the math extension).
NAMESPACED_FUNCTIONS = frozenset(
    {
        "math.greatest",
        "math.least",
        "math.ceil",
        "math.floor",
        "math.round",
        "math.trunc",
        "math.abs",
        "math.sign",
    }
)
