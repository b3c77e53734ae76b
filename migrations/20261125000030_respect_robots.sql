-- A site obeys its robots.txt unless told not to: a page robots.txt
-- disallows for our user agent is not fetched, and its Crawl-delay slows the
-- site's fleet-wide pace when it is stricter than the site's own.
ALTER TABLE sites ADD COLUMN respect_robots BOOLEAN NOT NULL DEFAULT TRUE;

-- A run that completed without reading all its pages says where it stopped
-- and why (robots_disallowed: robots.txt disallows that page). Both or neither.
ALTER TABLE crawl_runs
    ADD COLUMN stopped_at_url TEXT,
    ADD COLUMN stop_reason TEXT,
    ADD CONSTRAINT crawl_runs_stop_check CHECK ((stopped_at_url IS NULL) = (stop_reason IS NULL));
