"""The state machine: a transaction's identity map (`tx.Tx`), driving tokens through the graph,
parking, claims, reports, starts and eager handover. Imports `model` and `store` only."""
