"""The engine's records and pure values: the types it takes and returns, instance data (a
token's input and context), and the clock seam. Imports nothing else of the engine."""
