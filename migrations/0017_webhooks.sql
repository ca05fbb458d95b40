-- Webhooks: a run that names one is announced, once it has ended, by a POST of the run and its
-- final values to that URL (a host the operator allows, checked when the run is made and again
-- when it is sent). The announcement is queued by the statement that ends the run (the trigger
-- below), so a crash between the two loses none; api processes send them, at least once, with
-- backoff, and delete them once sent or given up.
alter table mostrador.runs add column webhook text;

create table mostrador.webhook_deliveries (
    -- No foreign key: a delivery outlives nothing, and a run deleted before it is sent (a
    -- rollback, retention) is skipped by the sender.
    run_id uuid primary key,
    thread_id uuid not null,
    url text not null,
    attempts integer not null default 0,
    -- When a sender may take it next: pushed ahead while one holds it, and by the backoff after a
    -- failure.
    next_attempt_at timestamptz not null default now(),
    last_error text,
    created_at timestamptz not null default now()
);

create index webhook_deliveries_due_idx on mostrador.webhook_deliveries (next_attempt_at);

create function mostrador.queue_webhook() returns trigger
language plpgsql as $$
begin
    insert into mostrador.webhook_deliveries (run_id, thread_id, url)
    values (new.run_id, new.thread_id, new.webhook)
    on conflict (run_id) do nothing;
    return null;
end;
$$;

-- Only runs with a webhook call the function (the WHEN clause costs the others nothing), once,
-- as they leave pending or running for an ending.
create trigger runs_webhook
    after update of status on mostrador.runs
    for each row
    when (
        new.webhook is not null
        and old.status in ('pending', 'running')
        and new.status not in ('pending', 'running')
    )
    execute function mostrador.queue_webhook();
