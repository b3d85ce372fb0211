-- The publication pgoutbox streams. Inserts only: the outbox's cleanup deletes are neither
-- blocked by a missing replica identity nor sent. Create it before the slot (a slot decodes
-- publication membership as of each change's position). Running the file again is harmless: an
-- existing publication is left as it is.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication WHERE pubname = 'pgoutbox') THEN
        CREATE PUBLICATION pgoutbox FOR TABLE public.outbox WITH (publish = 'insert');
    END IF;
END
$$;
