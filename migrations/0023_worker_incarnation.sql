-- Which process a worker is, for its next incarnation under the same name (the same pod's next
-- container, the same `mostrador dev` started again): `<boot id>:<pid>:<start time>`, so a worker
-- that starts can tell a previous one that is surely gone (same machine, that process no longer
-- there) and take its runs back at once instead of waiting out its lease. Null: not known.
alter table mostrador.workers add column incarnation text;
