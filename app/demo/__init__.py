"""The local demo: a Tansu broker, SQLite, a worker and a realistic batch of orders."""
