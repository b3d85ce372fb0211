-- The publication pgoutbox streams. Inserts only: the outbox's cleanup deletes are neither
-- blocked by a missing replica identity nor sent. Create it before the slot (a slot decodes
-- publication membership as of each change's position).
CREATE PUBLICATION pgoutbox FOR TABLE public.outbox WITH (publish = 'insert');
