-- The seeds' local message table (本地消息表), in the order service's database ("shop"), as
-- systems have it before pgoutbox: the service writes the row in the same transaction as the
-- order, and a polling relay (examples/outbox-poller) publishes rows still NEW, then marks them
-- SENT; a failed publish counts in retries and the row is tried again at the next poll.
--
-- The event columns are pgoutbox's default mapping (docs/configuration.md, tables[].columns),
-- so the same table moves to pgoutbox as it is (docs/migrating.md "Switching from a polling relay"):
--   id -> header id, aggregatetype -> topic outbox.event.<aggregatetype>, aggregateid -> key,
--   type -> header type, payload -> value.
-- status, retries and sent_at are the poller's bookkeeping; pgoutbox ignores them, except for
-- the cutover's backfill predicate status = 'NEW'.
CREATE TABLE IF NOT EXISTS public.local_message (
    id            uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
    aggregatetype varchar(255) NOT NULL,
    aggregateid   varchar(255) NOT NULL,
    type          varchar(255) NOT NULL,
    payload       jsonb,
    status        varchar(4)   NOT NULL DEFAULT 'NEW' CHECK (status IN ('NEW', 'SENT')),
    retries       integer      NOT NULL DEFAULT 0,
    created_at    timestamptz  NOT NULL DEFAULT now(),
    sent_at       timestamptz
);
-- The poller's claim (oldest NEW first) reads this partial index; SENT rows drop out of it.
CREATE INDEX IF NOT EXISTS local_message_new ON public.local_message (created_at) WHERE status = 'NEW';
