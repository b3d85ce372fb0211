-- The outbox table, in Debezium's outbox shape, so pgoutbox's default mapping serves it as is:
--   id            event id        -> Kafka header "id" (consumers deduplicate on it)
--   aggregatetype routing value   -> topic outbox.event.<aggregatetype>
--   aggregateid   business key    -> Kafka record key (per-key order)
--   type          event type      -> Kafka header "type"
--   payload       the event       -> Kafka record value (jsonb as its text)
-- Write it in the same transaction as the business change. Deleting the row in that same
-- transaction (insert-then-delete) keeps the table empty; the INSERT is still relayed.
CREATE TABLE IF NOT EXISTS public.outbox (
    id            uuid         PRIMARY KEY DEFAULT gen_random_uuid(),
    aggregatetype varchar(255) NOT NULL,
    aggregateid   varchar(255) NOT NULL,
    type          varchar(255) NOT NULL,
    payload       jsonb,
    created_at    timestamptz  NOT NULL DEFAULT now()
);
