-- A cron's schedule is read on the clocks of an IANA time zone (`Europe/Madrid`); none is UTC.
alter table mostrador.crons add column timezone text;
