"""Operations: signal and cancel, repair, bulk actions and their runner, migration, pruning,
the leader's election and tick. Each takes an `OpsContext` (context.py), never the `Engine`."""
