"""Errors a handler raises, or sees, on purpose."""

from __future__ import annotations

from wiggle.errors import WiggleError

__all__ = ["NonRetryable", "NotInActivity"]


class NonRetryable(Exception):
    """Raised by a handler to fail its step for good: no retry, the instance fails now.

    Any other exception fails the attempt and leaves the retry policy of the step in charge.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotInActivity(WiggleError, RuntimeError):
    """`step()` was called outside a running activity."""

    def __init__(self) -> None:
        super().__init__(
            "step() is only available while a Wiggle activity runs; call it from the handler "
            "(or code it calls), not at import time or from another thread"
        )
