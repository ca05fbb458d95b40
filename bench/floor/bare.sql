-- A bare one-row durable commit.
insert into t (v) values (1);
