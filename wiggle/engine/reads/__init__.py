"""What the engine shows: describe, explanations, listing and filtering, operator aggregates
and the workers seen. Imports `model`, `store` and `machine`, never `ops` or the facade."""
