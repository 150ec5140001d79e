"""Registry, @activity, step(), NonRetryable, the handlers loader and running one handler."""

from __future__ import annotations

import logging
import sys
import textwrap

import pytest

from wiggle.graph import ExecutionMode
from wiggle.worker import NonRetryable, NotInActivity, Registry, StepInfo, load_handlers, step
from wiggle.worker._activities import run_handler

INFO = StepInfo(
    "i-1",
    "validate",
    2,
    "orders",
    "sha256:" + "0" * 64,
    "validate",
    ExecutionMode.LOCAL_SYNC,
    "t-1",
)


def test_decorator_forms_register_by_function_name_or_explicit_name():
    reg = Registry()

    @reg.activity
    def validate(ctx):
        return ctx

    @reg.activity("in_stock")
    def check_stock(ctx) -> bool:
        return True

    assert reg.names() == ["in_stock", "validate"]
    assert reg.get("validate").fn is validate  # the decorator returns the function unchanged
    assert reg.get("in_stock").fn is check_stock
    assert "check_stock" not in reg


def test_two_functions_under_one_name_are_refused_with_both_named():
    reg = Registry()

    @reg.activity("dup")
    def first(ctx):
        return ctx

    with pytest.raises(ValueError, match="already registered"):

        @reg.activity("dup")
        def second(ctx):
            return ctx


def test_registering_the_same_function_again_is_harmless():
    reg = Registry()

    def f(ctx):
        return ctx

    reg.register(f)
    reg.register(f)
    assert len(reg) == 1


def test_activity_decorator_rejects_a_non_name():
    reg = Registry()
    with pytest.raises(TypeError):
        reg.activity(42)


def test_step_outside_an_activity_is_a_clear_error():
    with pytest.raises(NotInActivity, match="only available while a Wiggle activity runs"):
        step()


def test_step_inside_a_handler_and_reset_after():
    seen = []
    reg = Registry()

    @reg.activity
    def validate(ctx):
        seen.append(step())
        return ctx

    outcome = run_handler(reg.get("validate"), "validate", {"a": 1}, INFO, predicate=False)
    assert outcome.failure is None
    assert seen == [INFO]
    with pytest.raises(NotInActivity):
        step()


def test_async_handlers_run_and_see_their_step():
    reg = Registry()

    @reg.activity
    async def validate(ctx):
        return {"node": step().node_id, **ctx}

    outcome = run_handler(reg.get("validate"), "validate", {"a": 1}, INFO, predicate=False)
    assert outcome.value == {"node": "validate", "a": 1}
    assert outcome.context == b'{"node":"validate","a":1}'


def test_outcomes_of_results_and_exceptions():
    reg = Registry()

    @reg.activity
    def ok(ctx):
        return [ctx, None]

    @reg.activity
    def boom(ctx):
        raise KeyError("qty")

    @reg.activity
    def final(ctx):
        raise NonRetryable("card reported stolen")

    @reg.activity
    def not_json(ctx):
        return {1, 2}

    @reg.activity
    def maybe(ctx):
        return "yes"

    assert run_handler(reg.get("ok"), "ok", 1, INFO, predicate=False).context == b"[1,null]"
    failed = run_handler(reg.get("boom"), "boom", 1, INFO, predicate=False).failure
    assert failed is not None and not failed.non_retryable and failed.error_type == "KeyError"
    final_failure = run_handler(reg.get("final"), "final", 1, INFO, predicate=False).failure
    assert final_failure is not None
    assert final_failure.non_retryable and final_failure.message == "card reported stolen"
    bad = run_handler(reg.get("not_json"), "not_json", 1, INFO, predicate=False).failure
    assert bad is not None and "not JSON" in bad.message
    pred = run_handler(reg.get("maybe"), "maybe", 1, INFO, predicate=True).failure
    assert pred is not None and "expected a bool" in pred.message
    missing = run_handler(None, "nope", 1, INFO, predicate=False).failure
    assert missing is not None and "no activity named 'nope'" in missing.message


def test_a_failed_attempt_is_logged_as_one_line_and_its_traceback_only_at_debug(caplog):
    reg = Registry()

    @reg.activity("authorise")
    def flaky(ctx):
        raise TimeoutError("card network timed out")

    caplog.set_level(logging.DEBUG, logger="wiggle.worker")
    out = run_handler(reg.get("authorise"), "authorise", {}, INFO, predicate=False)
    assert out.failure is not None and out.failure.message == "card network timed out"
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "step validate of instance i-1 failed (activity 'authorise', attempt 2): "
        "TimeoutError: card network timed out"
    ]
    assert warnings[0].exc_info is None  # one line: no traceback at WARNING
    (debug,) = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert debug.exc_info is not None and debug.exc_info[0] is TimeoutError


def test_predicates_return_booleans():
    reg = Registry()

    @reg.activity
    def in_stock(ctx):
        return ctx["qty"] <= 10

    assert run_handler(reg.get("in_stock"), "in_stock", {"qty": 3}, INFO, predicate=True).predicate
    assert (
        run_handler(reg.get("in_stock"), "in_stock", {"qty": 30}, INFO, predicate=True).predicate
        is False
    )


HANDLERS = textwrap.dedent(
    """
    from wiggle.worker import activity

    @activity
    def validate(ctx):
        return {**ctx, "valid": True}

    @activity("in_stock")
    def check(ctx):
        return True

    def helper(ctx):  # not an activity
        return ctx
    """
)


def test_loader_reads_a_file_path_and_returns_only_its_activities(tmp_path):
    path = tmp_path / "my_handlers.py"
    path.write_text(HANDLERS)
    reg = load_handlers(str(path))
    assert reg.names() == ["in_stock", "validate"]
    # Loading the same file again reuses the module instead of importing it twice.
    again = load_handlers(path.as_posix())
    assert again.get("validate").fn is reg.get("validate").fn


def test_loader_reads_a_module_name_even_when_already_imported(tmp_path, monkeypatch):
    (tmp_path / "wiggle_test_handlers_mod.py").write_text(HANDLERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        first = load_handlers("wiggle_test_handlers_mod")
        second = load_handlers("wiggle_test_handlers_mod")  # already in sys.modules
        assert first.names() == second.names() == ["in_stock", "validate"]
    finally:
        sys.modules.pop("wiggle_test_handlers_mod", None)


def test_loader_errors_name_what_was_asked(tmp_path):
    with pytest.raises(ImportError, match="does not exist"):
        load_handlers(str(tmp_path / "missing.py"))
    with pytest.raises(ModuleNotFoundError):
        load_handlers("wiggle_no_such_handlers_module")
