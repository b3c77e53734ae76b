-- A URL list is crawled: a run reads a list's URLs instead of a keyword's
-- search. Columns only, each added nullable or defaulted, so the previous
-- release's worker keeps crawling keywords during a rolling deploy.

-- A run is of a keyword or of a URL list, never both. A list run's period
-- starts at its fire's nominal time (or its manual trigger): the entries not
-- read since then are what it reads.
ALTER TABLE crawl_runs
    ALTER COLUMN keyword_id DROP NOT NULL,
    ADD COLUMN url_list_id BIGINT REFERENCES url_lists (id) ON DELETE CASCADE,
    ADD COLUMN period_start TIMESTAMPTZ,
    -- URLs of the list that failed in this run (recorded on their entries).
    ADD COLUMN urls_failed INTEGER NOT NULL DEFAULT 0,
    ADD CONSTRAINT crawl_runs_one_target CHECK ((keyword_id IS NULL) <> (url_list_id IS NULL));
-- At most one active run per list (a list belongs to one site).
CREATE UNIQUE INDEX crawl_runs_one_active_list ON crawl_runs (url_list_id)
    WHERE url_list_id IS NOT NULL AND state IN ('queued', 'running', 'url_call', 'call_done');
CREATE INDEX crawl_runs_url_list ON crawl_runs (url_list_id) WHERE url_list_id IS NOT NULL;

-- A list's items are identified by their URL within (list, site), apart
-- from any keyword's.
ALTER TABLE items
    ALTER COLUMN keyword_id DROP NOT NULL,
    ADD COLUMN url_list_id BIGINT REFERENCES url_lists (id) ON DELETE CASCADE;
CREATE UNIQUE INDEX items_url_list_key ON items (url_list_id, site_id, item_key)
    WHERE url_list_id IS NOT NULL;

ALTER TABLE crawl_results
    ALTER COLUMN keyword_id DROP NOT NULL,
    ADD COLUMN url_list_id BIGINT REFERENCES url_lists (id) ON DELETE CASCADE;
CREATE INDEX crawl_results_url_list ON crawl_results (url_list_id, id) WHERE url_list_id IS NOT NULL;

-- A URL whose page could not be read (an error status after the usual
-- retries, a refused target): when and why, so it is reported, not skipped
-- in silence. Cleared when a later read stores its page.
ALTER TABLE url_list_entries
    ADD COLUMN failed_at  TIMESTAMPTZ,
    ADD COLUMN last_error TEXT;
