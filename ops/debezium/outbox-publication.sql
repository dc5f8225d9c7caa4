-- What the outbox connector (outbox-connector.json) needs in the order service's database.
-- Run once as a superuser; the names match the connector's configuration.

-- Inserts only: the relay's and the cleanup's UPDATEs and DELETEs of outbox rows are not
-- events, and the outbox event router would only warn about each of them. Not the rows of
-- the framework's own workers (aggregate_type 'effectively-once': their retry and DLT
-- records, whose bytes only the framework's relay sends), should they share this database;
-- the connector's snapshot leaves them out too (snapshot.select.statement.overrides).
-- A row filter needs PostgreSQL 15 or later.
CREATE PUBLICATION orders_outbox FOR TABLE public.outbox_event
    WHERE (aggregate_type <> 'effectively-once') WITH (publish = 'insert');

-- The connector's own login: it reads the replication stream and, for the initial
-- snapshot, the table. (wal_level = logical must be set on the server.)
CREATE ROLE outbox_cdc WITH LOGIN REPLICATION PASSWORD 'change me';
GRANT SELECT ON public.outbox_event TO outbox_cdc;
