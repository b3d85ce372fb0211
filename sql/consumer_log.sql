-- The consumer's idempotency table (the seeds' consumer_log). A consumer inserts a row here in
-- the SAME local transaction as its business update, then commits, then commits its Kafka
-- offset. A record delivered twice (at-least-once) fails the primary key on its second insert,
-- so its business effect happens once:
--
--   BEGIN;
--   INSERT INTO consumer_log (consumer, msg_id) VALUES ('stock-service', $event_id)
--     ON CONFLICT DO NOTHING;              -- 0 rows inserted: a duplicate, skip the update
--   UPDATE stock SET available = available - $qty WHERE sku_id = $sku;
--   COMMIT;                                -- then commit the Kafka offset
--
-- The key includes the consumer, so several services can share the table.
CREATE TABLE IF NOT EXISTS public.consumer_log (
    consumer    varchar(64) NOT NULL,   -- the consuming service (e.g. its group.id)
    msg_id      varchar(64) NOT NULL,   -- the event id: Kafka header "id"
    consumed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, msg_id)
);
