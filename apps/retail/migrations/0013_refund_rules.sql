-- Refunds bound to the decision that allows them. An approval records who decided it and as a
-- manager of which store; a refund names the approval it executes, and is paid only if that
-- approval was decided by a manager of the order's store who is not its customer, for no more
-- than the order may still refund. An approval whose conversation went on without a decision (the
-- customer asked something else) is `withdrawn`; a return whose approved refund the order could no
-- longer pay when it ran is `refused`.
alter table retail.approvals
    add column decided_by text,
    add column decided_store text,
    drop constraint approvals_status_check,
    add constraint approvals_status_check
        check (status in ('pending', 'approved', 'rejected', 'withdrawn')),
    -- Approvals decided before this migration named no one: kept, and never refunded.
    add constraint approvals_approved_names_its_decider
        check (status <> 'approved' or (decided_by is not null and decided_store is not null))
        not valid;

alter table retail.returns
    drop constraint returns_status_check,
    add constraint returns_status_check
        check (status in ('awaiting_approval', 'rejected', 'refunded', 'refused', 'withdrawn'));

alter table retail.refunds
    add column approval_id uuid references retail.approvals;

-- The pending approvals of a thread, withdrawn when its conversation goes on.
create index approvals_pending_thread_idx
    on retail.approvals (thread_id)
    where status = 'pending';
