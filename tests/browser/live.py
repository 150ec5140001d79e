"""Reading the console's live parts from a browser test."""

from __future__ import annotations

from typing import Any


def live_text(driver: Any, selector: str) -> str:
    """The rendered text of the element `selector` names, read in one script: the console's
    live parts are swapped while the page is open, so an element found first and read after
    may be stale by then."""
    text: str = driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e === null ? null : e.innerText;",
        selector,
    )
    assert text is not None, f"nothing matches {selector}"
    return text


def live_attr(driver: Any, selector: str, name: str) -> str | None:
    """Attribute `name` of the element `selector` names, read in one script (see live_text)."""
    found: list[Any] = driver.execute_script(
        "const e = document.querySelector(arguments[0]);"
        " return e === null ? [false, null] : [true, e.getAttribute(arguments[1])];",
        selector,
        name,
    )
    assert found[0], f"nothing matches {selector}"
    value: str | None = found[1]
    return value


def live_texts(driver: Any, selector: str) -> list[str]:
    """The rendered text of every element `selector` names, read in one script (see live_text)."""
    texts: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.innerText);", selector
    )
    return texts


def live_click(driver: Any, selector: str) -> None:
    """Click the element `selector` names, found and clicked in one script (see live_text)."""
    found: bool = driver.execute_script(
        "const e = document.querySelector(arguments[0]); if (e !== null) e.click();"
        " return e !== null;",
        selector,
    )
    assert found, f"nothing matches {selector}"


def live_attrs(driver: Any, selector: str, *names: str) -> list[list[str | None]]:
    """Attributes `names` of every element `selector` names, in document order, read in one
    script (see live_text)."""
    rows: list[list[str | None]] = driver.execute_script(
        "const names = Array.from(arguments).slice(1);"
        " return Array.from(document.querySelectorAll(arguments[0]),"
        " e => names.map(n => e.getAttribute(n)));",
        selector,
        *names,
    )
    return rows
