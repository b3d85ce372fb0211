-- The order service's business table, in its own database ("shop"). The outbox table lives
-- beside it (sql/outbox.sql) so that an order and its event commit in ONE transaction:
--
--   BEGIN;
--   INSERT INTO orders (sku, quantity) VALUES ('SKU-7', 2) RETURNING id;     -- say 42
--   INSERT INTO outbox (aggregatetype, aggregateid, type, payload)
--     VALUES ('order', 'SKU-7', 'OrderCreated', '{"order_id": 42, "sku": "SKU-7", "quantity": 2}');
--   COMMIT;
CREATE TABLE IF NOT EXISTS public.orders (
    id         bigserial    PRIMARY KEY,
    sku        varchar(64)  NOT NULL,
    quantity   integer      NOT NULL CHECK (quantity > 0),
    created_at timestamptz  NOT NULL DEFAULT now()
);
