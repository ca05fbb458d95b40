-- N.B. By primary key through the array, in one order: the order every statement that locks
-- threads takes them in.
select t.thread_id
from mostrador.threads t
where t.thread_id = any($1::uuid[])
order by t.thread_id
for no key update of t
