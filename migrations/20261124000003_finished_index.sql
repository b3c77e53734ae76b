-- Runs by when they ended: the per-minute history of the console's overview
-- and retention read them by time alone.
CREATE INDEX crawl_runs_finished ON crawl_runs (finished_at) WHERE finished_at IS NOT NULL;
