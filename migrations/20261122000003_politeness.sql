-- Crawling like a good citizen at fleet scale: render modes, fleet-wide limits,
-- incremental crawls, kept sessions, identity.

ALTER TABLE sites
    ALTER COLUMN item_selector DROP NOT NULL,
    DROP CONSTRAINT sites_render_check,
    ADD CONSTRAINT sites_render_check CHECK (render IN ('browser', 'http', 'json')),
    -- json mode: {"items": "/ptr", "next_token": "/ptr", "token_param": "token"}
    ADD COLUMN json JSONB,
    ADD COLUMN blocked_selector TEXT,
    ADD COLUMN max_requests_per_sec DOUBLE PRECISION
        CHECK (max_requests_per_sec > 0 AND max_requests_per_sec <= 1000),
    ADD COLUMN max_concurrent_runs INTEGER NOT NULL DEFAULT 3
        CHECK (max_concurrent_runs BETWEEN 1 AND 1000),
    ADD COLUMN stop_on_seen BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN keep_session BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN exclusive_session BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN user_agent TEXT,
    ADD COLUMN headers JSONB NOT NULL DEFAULT '{}',
    -- Credentials included: never shown by the API, never logged.
    ADD COLUMN proxy TEXT;

-- What identifies an item across runs: its URL, else the hash of its fields.
ALTER TABLE crawl_results ADD COLUMN item_key TEXT;
UPDATE crawl_results SET item_key = COALESCE(item_url, content_hash);
ALTER TABLE crawl_results ALTER COLUMN item_key SET NOT NULL;
CREATE INDEX crawl_results_item ON crawl_results (keyword_id, site_id, item_key);

-- When each item of a keyword/site was first and last seen, whatever the run.
CREATE TABLE seen_items (
    keyword_id    BIGINT NOT NULL REFERENCES keywords (id) ON DELETE CASCADE,
    site_id       BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    item_key      TEXT NOT NULL,
    first_seen_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (keyword_id, site_id, item_key)
);
CREATE INDEX seen_items_last_seen ON seen_items (last_seen_at);
INSERT INTO seen_items (keyword_id, site_id, item_key, first_seen_at, last_seen_at)
SELECT keyword_id, site_id, item_key, min(fetched_at), max(fetched_at)
FROM crawl_results GROUP BY keyword_id, site_id, item_key;

-- A site's kept session (cookies, local storage), sealed with SESSION_KEY
-- (AES-256-GCM; the site id is the associated data).
CREATE TABLE site_sessions (
    site_id     BIGINT PRIMARY KEY REFERENCES sites (id) ON DELETE CASCADE,
    nonce       BYTEA NOT NULL,
    sealed      BYTEA NOT NULL,
    saved_by_run BIGINT,
    saved_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Workers have two kinds of slots: browser crawls and http/json crawls.
ALTER TABLE workers ADD COLUMN http_concurrency INTEGER NOT NULL DEFAULT 0;

-- The dispatcher counts a site's active runs for its fleet-wide limit.
CREATE INDEX crawl_runs_site_active ON crawl_runs (site_id)
    WHERE state IN ('running', 'url_call', 'call_done')
       OR (state = 'queued' AND dispatched_at IS NOT NULL);
