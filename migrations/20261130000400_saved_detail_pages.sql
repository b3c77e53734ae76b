-- The detail pages a site's saved runs read, kept beside their list pages
-- (saved_pages) so a replay reads an item's detail values again without
-- fetching (docs/saved-pages.md). Bounded with them: the site's bytes count
-- both, and a run pruned loses both.
CREATE TABLE saved_detail_pages (
    run_id     BIGINT NOT NULL REFERENCES crawl_runs (id) ON DELETE CASCADE,
    site_id    BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    url        TEXT NOT NULL,
    render     TEXT NOT NULL,
    body       BYTEA NOT NULL,
    raw_bytes  INTEGER NOT NULL,
    saved_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, url)
);
CREATE INDEX saved_detail_pages_site ON saved_detail_pages (site_id, run_id);
