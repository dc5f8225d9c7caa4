"""Database access: tables, engine, dialect helpers and migrations."""
