-- The site version a run crawled with, recorded by its claim (NULL on runs
-- claimed before it was recorded, and by a worker that does not record it).
ALTER TABLE crawl_runs ADD COLUMN site_version INTEGER;

-- The list pages of a site's last healthy runs, kept so an edited extraction
-- can be replayed over them without fetching (docs/saved-pages.md). The body
-- is the page as fetched, deflate-compressed; `items` what the run stored
-- from it. Bounded per site (runs and compressed bytes): the save prunes the
-- oldest in its own transaction.
CREATE TABLE saved_pages (
    run_id       BIGINT NOT NULL REFERENCES crawl_runs (id) ON DELETE CASCADE,
    site_id      BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    site_version INTEGER,
    page_no      INTEGER NOT NULL,
    url          TEXT NOT NULL,
    render       TEXT NOT NULL,
    body         BYTEA NOT NULL,
    raw_bytes    INTEGER NOT NULL,
    items        JSONB NOT NULL,
    saved_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, page_no)
);
CREATE INDEX saved_pages_site ON saved_pages (site_id, run_id);
