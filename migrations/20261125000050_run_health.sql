-- A site's expectations of a completed run; a run below them is completed
-- with health 'degraded' and a reason. blocked_since: since when the site's
-- refusals made runs fail or degrade (cleared by the next healthy run).
ALTER TABLE sites
    ADD COLUMN expect_min_items INTEGER,
    ADD COLUMN expect_required_fields TEXT[] NOT NULL DEFAULT '{}',
    ADD COLUMN expect_max_empty_runs INTEGER,
    ADD COLUMN blocked_since TIMESTAMPTZ;

-- health: set when a run completes (NULL on every other run, and on runs
-- completed before health was judged). refusals: page requests the site
-- refused during the run's attempts (each tried again after a pause).
ALTER TABLE crawl_runs
    ADD COLUMN health TEXT CHECK (health IN ('healthy', 'degraded')),
    ADD COLUMN health_reason TEXT,
    ADD COLUMN refusals INTEGER NOT NULL DEFAULT 0;

-- How an ended run went, as the site's health counts it: a run completed
-- before health was judged counts as healthy.
CREATE FUNCTION run_verdict(state TEXT, health TEXT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN state = 'failed' THEN 'failed'
                WHEN state = 'completed' AND health = 'degraded' THEN 'degraded'
                WHEN state = 'completed' THEN 'healthy'
           END;
