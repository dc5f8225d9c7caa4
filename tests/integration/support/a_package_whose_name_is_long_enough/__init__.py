"""Test-only handler package whose dotted name makes its version table's name as long as an
identifier may be (``app.db.histories.version_table_of``); one revision, one table."""
