-- The stock service's tables, in its own database ("stock"), beside sql/consumer_log.sql.
-- The consumer writes consumer_log, stock and stock_movements in one local transaction per
-- event, so an event's effect and the record that it was handled commit together.
CREATE TABLE IF NOT EXISTS public.stock (
    sku       varchar(64) PRIMARY KEY,
    initial   integer     NOT NULL,                      -- what the shelf started with
    available integer     NOT NULL CHECK (available >= 0)
);

-- One row per order event that took effect: 'applied' (stock reserved) or 'rejected'
-- (a business error such as insufficient stock; a compensating event was published).
-- Reconciliation compares these with the orders: none is a lost event, two is a double apply.
CREATE TABLE IF NOT EXISTS public.stock_movements (
    id         bigserial   PRIMARY KEY,
    msg_id     varchar(64) NOT NULL,                      -- the event id (Kafka header "id")
    order_id   bigint      NOT NULL,
    sku        varchar(64) NOT NULL,
    quantity   integer     NOT NULL,
    outcome    varchar(16) NOT NULL CHECK (outcome IN ('applied', 'rejected')),
    reason     text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS stock_movements_order_id ON public.stock_movements (order_id);
