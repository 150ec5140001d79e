"""Schedules: flows that start themselves on a timetable (docs/schedules.md).

    load_schedule / load_schedule_file   YAML or JSON → Schedule (raises FlowError with every
                                         problem, each at FILE:LINE:COL)
    nominal_times                        a schedule's nominal times after an instant
    catch_up, overlap, jitter_ms         the firing rules, pure
    instance_id                          the instance a nominal time starts

The stages, each a private module: `_load` (schedule.schema.json and the checks the schema
cannot make), `_model` (the checked schedule), `_times` (cron, calendar and interval times in a
zone, with the clock-change rule), `_rules` (what a due nominal time does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wiggle._lazy import lazy_getattr

if TYPE_CHECKING:
    from wiggle.schedules._load import (
        SCHEDULE_SUFFIXES,
        load_schedule,
        load_schedule_file,
        load_stored,
        schedule_schema,
    )
    from wiggle.schedules._model import (
        Calendar,
        CatchUp,
        Exclusion,
        Schedule,
        Spec,
    )
    from wiggle.schedules._rules import (
        GRACE_MS,
        Decision,
        catch_up,
        fire_input,
        instance_id,
        jitter_ms,
        nominal_from_instance_id,
        overlap,
        rfc3339,
    )
    from wiggle.schedules._times import (
        local_time,
        nominal_times,
    )

# Each name is imported on first use: a server needs the times and the rules to start, and the
# loader (the schedule schema, jsonschema, the flow compiler's YAML reader) only when a schedule
# is applied or read back.
__getattr__ = lazy_getattr(
    __name__,
    {
        "SCHEDULE_SUFFIXES": "wiggle.schedules._load",
        "load_schedule": "wiggle.schedules._load",
        "load_schedule_file": "wiggle.schedules._load",
        "load_stored": "wiggle.schedules._load",
        "schedule_schema": "wiggle.schedules._load",
        "Calendar": "wiggle.schedules._model",
        "CatchUp": "wiggle.schedules._model",
        "Exclusion": "wiggle.schedules._model",
        "Schedule": "wiggle.schedules._model",
        "Spec": "wiggle.schedules._model",
        "GRACE_MS": "wiggle.schedules._rules",
        "Decision": "wiggle.schedules._rules",
        "catch_up": "wiggle.schedules._rules",
        "fire_input": "wiggle.schedules._rules",
        "instance_id": "wiggle.schedules._rules",
        "jitter_ms": "wiggle.schedules._rules",
        "nominal_from_instance_id": "wiggle.schedules._rules",
        "overlap": "wiggle.schedules._rules",
        "rfc3339": "wiggle.schedules._rules",
        "local_time": "wiggle.schedules._times",
        "nominal_times": "wiggle.schedules._times",
    },
)

__all__ = [
    "GRACE_MS",
    "SCHEDULE_SUFFIXES",
    "Calendar",
    "CatchUp",
    "Decision",
    "Exclusion",
    "Schedule",
    "Spec",
    "catch_up",
    "fire_input",
    "instance_id",
    "jitter_ms",
    "load_schedule",
    "load_schedule_file",
    "load_stored",
    "local_time",
    "nominal_from_instance_id",
    "nominal_times",
    "overlap",
    "rfc3339",
    "schedule_schema",
]
