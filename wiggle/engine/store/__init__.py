"""The database edge: the schema (both shapes: default and distributed), the SQL the engine
runs, rows as records, the database seam (`db.Database`: one SQLAlchemy engine with the dialect's
pieces, SQLite's and PostgreSQL's writes), the distributed profile, and the in-process wake-ups
a commit triggers. Imports only `model`."""
