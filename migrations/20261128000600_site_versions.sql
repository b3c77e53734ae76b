-- Every change to how a site is read is a version: its spec's columns as they
-- were (`snapshot`, a JSON object of the columns; header names and the proxy
-- are the site's identity, sealed apart, and not versioned), why it changed and
-- which token changed it. `sites.version` is the version the site is at.
-- A site stored before versions existed gets version 1 (`recorded`, its state
-- then) at its first change.
ALTER TABLE sites ADD COLUMN version INTEGER NOT NULL DEFAULT 0;

CREATE TABLE site_versions (
    site_id       BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    version       INTEGER NOT NULL CONSTRAINT site_versions_version_check CHECK (version > 0),
    reason        TEXT NOT NULL,
    -- For a restore: the version whose spec it brought back.
    restored_from INTEGER,
    -- The token that made the change, as a prefix of its digest; none when the
    -- api runs without tokens or the change was not made through it.
    changed_by    TEXT,
    snapshot      JSONB NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (site_id, version)
);
