-- Every attempt of a run: who ran it, when, how it ended and why.
CREATE TABLE crawl_attempts (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id      BIGINT NOT NULL REFERENCES crawl_runs (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    worker_id   TEXT NOT NULL,
    started_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    ended_at    TIMESTAMPTZ,
    -- completed | failed | released (handed back on drain) | cancelled
    outcome     TEXT CHECK (outcome IN ('completed', 'failed', 'released', 'cancelled')),
    reason      TEXT,
    last_url    TEXT
);
CREATE INDEX crawl_attempts_run ON crawl_attempts (run_id, id);
-- The attempt a worker holds right now.
CREATE UNIQUE INDEX crawl_attempts_open ON crawl_attempts (run_id, attempt, worker_id)
    WHERE ended_at IS NULL;
