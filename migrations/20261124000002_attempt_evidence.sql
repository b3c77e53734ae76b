-- What a worker saw when an attempt failed: the page's HTML (capped) and, in
-- browser mode, a screenshot (PNG, capped). Goes with its run (retention).
CREATE TABLE attempt_evidence (
    run_id      BIGINT NOT NULL REFERENCES crawl_runs (id) ON DELETE CASCADE,
    attempt     INTEGER NOT NULL,
    page_url    TEXT,
    html        TEXT,
    screenshot  BYTEA,
    captured_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, attempt)
);
