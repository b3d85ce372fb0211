-- The least-privilege role pgoutbox connects as: LOGIN and REPLICATION, nothing else. LOGIN lets
-- it connect; REPLICATION lets it open the replication connection, create its slot and stream
-- from it (pg_replication_slots, pg_current_wal_lsn() and the catalogs are readable by every
-- role); it gives no access to table data. Streaming needs no SELECT on the outbox: logical
-- decoding reads the WAL, never the table. Backfill (tables[].backfill.where) and pgoutbox
-- republish do read the table, and need SELECT on it; grant it only then, on that table alone
-- (GRANT SELECT ON public.outbox TO pgoutbox), since their predicate runs with the role's
-- rights (SECURITY.md "Backfill and republish predicates"). It owns nothing, so it cannot create
-- the publication: run sql/publication.sql as the tables' owner and keep
-- postgres.create_publication false.
--
-- Run it as a superuser in the outbox's database, after sql/outbox.sql (psql 15 or later):
--
--   psql -d app -f sql/role.sql                                  # role "pgoutbox", no password yet
--   PGOUTBOX_ROLE_PASSWORD=… psql -d app -f sql/role.sql         # password from the environment
--   psql -d app -v pgoutbox_role=relay -f sql/role.sql           # another role name
--
-- The password never sits in this file. From the environment it is sent to the server inside
-- ALTER ROLE, so a server with log_statement = 'ddl' or 'all' logs it: then leave it unset here
-- and type it with psql's \password pgoutbox, which sends only a SCRAM verifier. pgoutbox reads
-- it from PGOUTBOX_POSTGRES_PASSWORD or postgres.password_file.
--
-- More outbox tables, or one in another schema: nothing to grant (but SELECT for a backfill or
-- republish of it, above). Running the file again is harmless.
\set ON_ERROR_STOP on
\if :{?pgoutbox_role}
\else
  \set pgoutbox_role pgoutbox
\endif
\if :{?pgoutbox_password}
\else
  \getenv pgoutbox_password PGOUTBOX_ROLE_PASSWORD
\endif

SELECT NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = :'pgoutbox_role') AS pgoutbox_role_missing \gset
\if :pgoutbox_role_missing
  CREATE ROLE :"pgoutbox_role" LOGIN REPLICATION;
\endif
-- Whatever it was before: no superuser, no role or database creation, no RLS bypass, and no
-- privileges inherited from roles it may be a member of.
ALTER ROLE :"pgoutbox_role" LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS NOINHERIT;
\if :{?pgoutbox_password}
  ALTER ROLE :"pgoutbox_role" PASSWORD :'pgoutbox_password';
\endif

