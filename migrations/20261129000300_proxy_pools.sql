-- The health of each proxy a site's pages go out through, shared by every
-- worker of the fleet: pages and refusals counted, and a member that drew a
-- refusal retired until `retired_until`, for a back-off that doubles with each
-- retirement in a row (`consecutive`); a page through it resets that. `proxy`
-- is the member's address, scheme://host:port: never its credentials.
CREATE TABLE proxy_health (
    site_id       BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    proxy         TEXT NOT NULL,
    pages         BIGINT NOT NULL DEFAULT 0,
    refusals      BIGINT NOT NULL DEFAULT 0,
    consecutive   INTEGER NOT NULL DEFAULT 0,
    retired_until TIMESTAMPTZ,
    last_error    TEXT,
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (site_id, proxy)
);
