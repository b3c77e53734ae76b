-- Sites: what to crawl and how to read it.
CREATE TABLE sites (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            TEXT NOT NULL UNIQUE,
    search_url      TEXT NOT NULL,
    item_selector   TEXT NOT NULL,
    -- {"title": {"selector": "a.title", "attr": null}, ...}
    fields          JSONB NOT NULL,
    wait_for        TEXT,
    max_pages       INTEGER NOT NULL DEFAULT 1 CHECK (max_pages BETWEEN 1 AND 1000),
    render          TEXT NOT NULL DEFAULT 'browser' CHECK (render IN ('browser')),
    -- NULL: the process default (STUCK_TIMEOUT_SECS, MAX_ATTEMPTS).
    stuck_timeout_secs INTEGER CHECK (stuck_timeout_secs > 0),
    max_attempts    INTEGER CHECK (max_attempts BETWEEN 1 AND 100),
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE keywords (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    keyword     TEXT NOT NULL,
    schedule    TEXT NOT NULL,
    enabled     BOOLEAN NOT NULL DEFAULT TRUE,
    priority    INTEGER NOT NULL DEFAULT 0,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE keyword_sites (
    keyword_id  BIGINT NOT NULL REFERENCES keywords (id) ON DELETE CASCADE,
    site_id     BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    PRIMARY KEY (keyword_id, site_id)
);
CREATE INDEX keyword_sites_site ON keyword_sites (site_id);

-- One crawl of one keyword on one site (docs/design.md, "Crawl run state machine").
CREATE TABLE crawl_runs (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    keyword_id       BIGINT NOT NULL REFERENCES keywords (id) ON DELETE CASCADE,
    site_id          BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    state            TEXT NOT NULL CHECK (state IN
                     ('queued', 'running', 'url_call', 'call_done', 'completed', 'failed', 'skipped', 'cancelled')),
    trigger          TEXT NOT NULL CHECK (trigger IN ('manual', 'schedule')),
    priority         INTEGER NOT NULL DEFAULT 0,
    attempt          INTEGER NOT NULL DEFAULT 1,
    max_attempts     INTEGER NOT NULL,
    worker_id        TEXT,
    pages_crawled    INTEGER NOT NULL DEFAULT 0,
    items_found      INTEGER NOT NULL DEFAULT 0,
    current_url      TEXT,
    error            TEXT,
    queued_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    not_before       TIMESTAMPTZ,
    dispatched_at    TIMESTAMPTZ,
    started_at       TIMESTAMPTZ,
    heartbeat_at     TIMESTAMPTZ,
    state_changed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at      TIMESTAMPTZ
);

-- At most one active run per keyword/site.
CREATE UNIQUE INDEX crawl_runs_one_active ON crawl_runs (keyword_id, site_id)
    WHERE state IN ('queued', 'running', 'url_call', 'call_done');
-- The dispatcher's backlog scan: queued and not yet in Redis.
CREATE INDEX crawl_runs_backlog ON crawl_runs (site_id, priority DESC, queued_at, id)
    WHERE state = 'queued' AND dispatched_at IS NULL;
CREATE INDEX crawl_runs_in_redis ON crawl_runs (dispatched_at)
    WHERE state = 'queued' AND dispatched_at IS NOT NULL;
CREATE INDEX crawl_runs_keyword_site_finished ON crawl_runs (keyword_id, site_id, finished_at)
    WHERE state = 'completed';
CREATE INDEX crawl_runs_state ON crawl_runs (state);
CREATE INDEX crawl_runs_site ON crawl_runs (site_id);

CREATE TABLE crawl_results (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id        BIGINT NOT NULL REFERENCES crawl_runs (id) ON DELETE CASCADE,
    keyword_id    BIGINT NOT NULL REFERENCES keywords (id) ON DELETE CASCADE,
    site_id       BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    page          INTEGER NOT NULL,
    position      INTEGER NOT NULL,
    page_url      TEXT NOT NULL,
    item_url      TEXT,
    fields        JSONB NOT NULL,
    content_hash  TEXT NOT NULL,
    fetched_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- A retried page overwrites its rows instead of adding new ones.
    UNIQUE (run_id, page, position)
);
CREATE INDEX crawl_results_keyword ON crawl_results (keyword_id, id);
CREATE INDEX crawl_results_site ON crawl_results (site_id, id);

-- Workers announce themselves so the dispatcher knows the fleet's concurrency.
CREATE TABLE workers (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    concurrency  INTEGER NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
