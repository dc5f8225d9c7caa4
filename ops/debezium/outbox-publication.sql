-- What the outbox connector (outbox-connector.json) needs in the order service's database.
-- Run once as a superuser; the names match the connector's configuration.

-- Inserts only: the relay's and the cleanup's UPDATEs and DELETEs of outbox rows are not
-- events, and the outbox event router would only warn about each of them.
CREATE PUBLICATION orders_outbox FOR TABLE public.outbox_event WITH (publish = 'insert');

-- The connector's own login: it reads the replication stream and, for the initial
-- snapshot, the table. (wal_level = logical must be set on the server.)
CREATE ROLE outbox_cdc WITH LOGIN REPLICATION PASSWORD 'change me';
GRANT SELECT ON public.outbox_event TO outbox_cdc;
