-- Keeping the outbox table small. pgoutbox reads committed INSERTs from the WAL, never from the
-- table, so a row may be deleted at any time after its transaction commits — even before pgoutbox
-- has relayed it: the INSERT is already in the WAL and the slot keeps that WAL until pgoutbox
-- confirms it. The publication publishes inserts only (sql/publication.sql), so the deletes are
-- neither sent nor need a replica identity. Three ways, pick one:
--
-- 1. Insert-then-delete: the application deletes its outbox row in the same transaction that
--    inserted it. The table stays empty, no job is needed, and vacuum has little to do.
--
--      BEGIN;
--      UPDATE orders SET status = 'paid' WHERE id = 42;
--      INSERT INTO outbox (id, aggregatetype, aggregateid, type, payload)
--        VALUES ('…', 'order', '42', 'OrderPaid', '{…}') RETURNING id;
--      DELETE FROM outbox WHERE id = '…';
--      COMMIT;
--
-- 2. Keep rows for a while (audit, reconciliation of "committed but no event" against Kafka),
--    then purge them in batches with the procedure below, e.g. hourly from cron or pg_cron:
--
--      CALL pgoutbox_purge_outbox('7 days');            -- rows older than a week
--      CALL pgoutbox_purge_outbox('1 day', 5000);       -- smaller batches
--
-- 3. A partitioned outbox with one partition per day; dropping a day is instant and leaves no
--    dead rows to vacuum. The publication must publish via the partition root so that rows arrive
--    under the outbox table's name whatever partition holds them, and new partitions are
--    published without touching it:
--
--      CREATE TABLE public.outbox_events (
--          id            uuid         NOT NULL DEFAULT gen_random_uuid(),
--          aggregatetype varchar(255) NOT NULL,
--          aggregateid   varchar(255) NOT NULL,
--          type          varchar(255) NOT NULL,
--          payload       jsonb,
--          created_at    timestamptz  NOT NULL DEFAULT now(),
--          PRIMARY KEY (id, created_at)
--      ) PARTITION BY RANGE (created_at);
--      CREATE PUBLICATION pgoutbox FOR TABLE public.outbox_events
--        WITH (publish = 'insert', publish_via_partition_root = true);
--
--    Then, daily: SELECT pgoutbox_add_day_partitions('public.outbox_events', 7);
--                 SELECT pgoutbox_drop_day_partitions('public.outbox_events', '7 days');
--    Partitions are named <table>_YYYYMMDD and cover that UTC day. An insert for a day without a
--    partition fails, so create them well ahead.
--
-- Run as the outbox's owner; the functions run with the caller's rights.

-- 2. Deletes rows of public.outbox whose created_at is older than `keep`, `batch_size` rows per
-- transaction, so that no long transaction holds locks or keeps vacuum from cleaning up. CALL it
-- outside a transaction block (it commits). A big table wants an index on created_at.
CREATE OR REPLACE PROCEDURE pgoutbox_purge_outbox(keep interval DEFAULT '7 days', batch_size integer DEFAULT 10000)
LANGUAGE plpgsql AS $$
DECLARE
    deleted integer;
BEGIN
    LOOP
        DELETE FROM public.outbox
        WHERE id IN (SELECT id FROM public.outbox WHERE created_at < now() - keep LIMIT batch_size);
        GET DIAGNOSTICS deleted = ROW_COUNT;
        COMMIT;
        EXIT WHEN deleted < batch_size;
    END LOOP;
END;
$$;

-- 3. Creates the daily partitions of `parent` from today (UTC) to `days_ahead` days later that do
-- not exist yet; returns how many it created.
CREATE OR REPLACE FUNCTION pgoutbox_add_day_partitions(parent regclass, days_ahead integer DEFAULT 7)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    schema_name text;
    table_name  text;
    day         date;
    part        text;
    created     integer := 0;
BEGIN
    SELECT n.nspname, c.relname INTO schema_name, table_name
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE c.oid = parent;
    FOR day IN SELECT generate_series((now() AT TIME ZONE 'UTC')::date,
                                      (now() AT TIME ZONE 'UTC')::date + days_ahead, interval '1 day')::date
    LOOP
        part := table_name || '_' || to_char(day, 'YYYYMMDD');
        IF to_regclass(format('%I.%I', schema_name, part)) IS NULL THEN
            EXECUTE format('CREATE TABLE %I.%I PARTITION OF %s FOR VALUES FROM (%L) TO (%L)',
                           schema_name, part, parent,
                           (day::timestamp AT TIME ZONE 'UTC'), ((day + 1)::timestamp AT TIME ZONE 'UTC'));
            created := created + 1;
        END IF;
    END LOOP;
    RETURN created;
END;
$$;

-- 3. Drops the daily partitions of `parent` whose whole day is older than `keep`; returns how
-- many it dropped. Only partitions named <parent>_YYYYMMDD are considered.
CREATE OR REPLACE FUNCTION pgoutbox_drop_day_partitions(parent regclass, keep interval DEFAULT '7 days')
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    part    record;
    dropped integer := 0;
BEGIN
    FOR part IN
        SELECT n.nspname AS schema_name, c.relname AS name,
               to_date(right(c.relname, 8), 'YYYYMMDD') AS day
        FROM pg_catalog.pg_inherits i
        JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
        JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_catalog.pg_class p ON p.oid = i.inhparent
        WHERE i.inhparent = parent
          AND length(c.relname) = length(p.relname) + 9
          AND left(c.relname, length(p.relname) + 1) = p.relname || '_'
          AND right(c.relname, 8) ~ '^[0-9]{8}$'
    LOOP
        IF (part.day + 1)::timestamp AT TIME ZONE 'UTC' <= now() - keep THEN
            EXECUTE format('DROP TABLE %I.%I', part.schema_name, part.name);
            dropped := dropped + 1;
        END IF;
    END LOOP;
    RETURN dropped;
END;
$$;
