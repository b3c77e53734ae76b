-- Repairs of sites whose markup changed. `sites.repair` is what a repair may
-- do: look for none (`off`), store verified proposals for a person
-- (`suggest`), or apply one that passes every verification (`auto`).
ALTER TABLE sites ADD COLUMN repair TEXT NOT NULL DEFAULT 'suggest'
    CHECK (repair IN ('off', 'suggest', 'auto'));

-- One repair per site version: the first run of a version that turns
-- degraded or finds no items claims it (`working`), so a site breaking on
-- every run costs one repair until its version changes. A repair left
-- `working` by a worker that died is claimed again after a while.
CREATE TABLE site_repairs (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    site_id         BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    -- The version the failing run read the site with.
    base_version    INTEGER NOT NULL,
    -- The failing run (kept while it is).
    run_id          BIGINT REFERENCES crawl_runs (id) ON DELETE SET NULL,
    state           TEXT NOT NULL CHECK (state IN ('working', 'proposed', 'none_found',
                        'accepted', 'applied', 'rejected', 'rolled_back')),
    worker_id       TEXT,
    -- The proposal: an item selector and the fields' specs (as `sites.fields`).
    item_selector   TEXT,
    fields          JSONB,
    -- Before and after items, field changes, and each verification's scores.
    evidence        JSONB,
    -- Why no proposal was made, or what deciding it did.
    verdict         TEXT,
    -- The version it became, once accepted or applied.
    applied_version INTEGER,
    -- Who decided it (a token's digest prefix; `auto` for the policy).
    decided_by      TEXT,
    started_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    proposed_at     TIMESTAMPTZ,
    decided_at      TIMESTAMPTZ,
    UNIQUE (site_id, base_version)
);
CREATE INDEX site_repairs_site ON site_repairs (site_id, id DESC);
CREATE INDEX site_repairs_run ON site_repairs (run_id) WHERE run_id IS NOT NULL;
