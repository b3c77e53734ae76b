-- A site's runs by when they ended: its health (last success, the last day,
-- its last completed runs) reads a range of this, not every run it ever had.
CREATE INDEX crawl_runs_site_finished ON crawl_runs (site_id, finished_at)
    WHERE finished_at IS NOT NULL;
