-- The business data of the four retail graphs (DESIGN.md §9): a chain's stores, its catalogue,
-- stock by store, customers' orders and returns, the managers' approval queue, refunds, purchase
-- proposals and product sheets. The graphs read and write it through `mostrador-agents`.
create schema retail;

create table retail.stores (
    store_id text primary key,
    name text not null,
    city text not null,
    address text not null,
    opening_hours text not null,
    phone text not null
);

create table retail.products (
    product_id text primary key,
    name text not null,
    category text not null,
    brand text not null,
    price numeric(10, 2) not null check (price >= 0),
    -- Facts a product sheet is written from (material, sizes, care, ...).
    attributes jsonb not null default '{}',
    -- Units a purchase order is rounded up to.
    pack_size integer not null default 1 check (pack_size > 0)
);

create table retail.stock (
    store_id text not null references retail.stores,
    product_id text not null references retail.products,
    quantity integer not null check (quantity >= 0),
    reorder_point integer not null check (reorder_point >= 0),
    primary key (store_id, product_id)
);

-- The purchasing pass looks for references below their reorder point.
create index stock_below_reorder_idx
    on retail.stock (store_id, product_id)
    where quantity < reorder_point;

create table retail.orders (
    order_id text primary key,
    -- The customer's subject (the `sub` of their token).
    customer text not null,
    store_id text not null references retail.stores,
    placed_at timestamptz not null,
    delivered_at timestamptz,
    total numeric(10, 2) not null check (total >= 0)
);

create index orders_customer_idx on retail.orders (customer, placed_at desc);

create table retail.order_lines (
    order_id text not null references retail.orders,
    line integer not null,
    product_id text not null references retail.products,
    quantity integer not null check (quantity > 0),
    unit_price numeric(10, 2) not null check (unit_price >= 0),
    primary key (order_id, line)
);

-- How many days after delivery a category may be returned.
create table retail.return_policies (
    category text primary key,
    days integer not null check (days >= 0),
    conditions text not null
);

-- A return a customer asked for in a conversation (`cliente`); one per proposing task.
create table retail.returns (
    return_id uuid primary key,
    order_id text not null references retail.orders,
    thread_id uuid not null,
    reason text not null,
    proposed_amount numeric(10, 2) not null check (proposed_amount > 0),
    status text not null default 'awaiting_approval'
        check (status in ('awaiting_approval', 'rejected', 'refunded')),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);

-- The managers' queue: a row per approval interrupt, written when the interrupt happens and
-- decided when the run resumes. `task_id` (stable across the node's re-runs) makes it idempotent.
create table retail.approvals (
    approval_id uuid primary key,
    task_id text not null unique,
    thread_id uuid not null,
    run_id uuid not null,
    store_id text not null references retail.stores,
    return_id uuid not null references retail.returns,
    order_id text not null references retail.orders,
    amount numeric(10, 2) not null check (amount > 0),
    reason text not null,
    status text not null default 'pending'
        check (status in ('pending', 'approved', 'rejected')),
    -- The amount approved (the proposed one, or the manager's edit).
    approved_amount numeric(10, 2),
    note text,
    created_at timestamptz not null default now(),
    decided_at timestamptz
);

create index approvals_pending_idx
    on retail.approvals (store_id, created_at)
    where status = 'pending';

-- Money sent back: at most one per return, and one per idempotency key (the refunding task).
create table retail.refunds (
    refund_id uuid primary key,
    return_id uuid not null unique references retail.returns,
    amount numeric(10, 2) not null check (amount > 0),
    idempotency_key text not null unique,
    created_at timestamptz not null default now()
);

-- The purchasing pass's output: one proposal per store, reference and day.
create table retail.purchase_proposals (
    pass_date date not null,
    store_id text not null references retail.stores,
    product_id text not null references retail.products,
    quantity integer not null check (quantity > 0),
    stock_at_proposal integer not null,
    reorder_point integer not null,
    run_id uuid not null,
    created_at timestamptz not null default now(),
    primary key (pass_date, store_id, product_id)
);

-- The product-sheet generator's output: the latest approved (or best) sheet per product.
create table retail.product_sheets (
    product_id text primary key references retail.products,
    content text not null,
    rounds integer not null check (rounds > 0),
    approved boolean not null,
    feedback text,
    run_id uuid not null,
    updated_at timestamptz not null default now()
);
