-- A site can be disabled (a broken site, while it is being fixed): it keeps
-- its settings and history, and no keyword queues a run for it.
ALTER TABLE sites ADD COLUMN enabled BOOLEAN NOT NULL DEFAULT TRUE;
