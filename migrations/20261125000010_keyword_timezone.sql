-- A keyword's schedule is read in its own IANA time zone (a Korean site is
-- crawled on Korean mornings), its fires are spread by up to `jitter_secs`,
-- and `last_fired_at` is the nominal time of its latest scheduled fire: a
-- fire is claimed by moving it forward in the transaction that queues the
-- runs, so two schedulers (a leader change, a catch-up) never fire a period
-- twice. Existing keywords keep UTC and no jitter: nothing moves.
ALTER TABLE keywords
    ADD COLUMN timezone TEXT NOT NULL DEFAULT 'UTC',
    ADD COLUMN jitter_secs INTEGER NOT NULL DEFAULT 0
        CONSTRAINT keywords_jitter_check CHECK (jitter_secs BETWEEN 0 AND 3600),
    ADD COLUMN last_fired_at TIMESTAMPTZ;
