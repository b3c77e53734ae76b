-- A site's secrets (its header values, its proxy's credentials) are sealed with
-- SESSION_KEY (src/sealing.rs). What stays in the clear is what responses show:
-- the header names, and the proxy with its credentials masked.
--
-- Values stored in the clear before this migration move to unsealed_*; the api
-- seals them at its next start with SESSION_KEY (store::sites::seal_unsealed) and
-- empties those columns. Until then the workers read them from there.
ALTER TABLE sites RENAME COLUMN headers TO unsealed_headers;
ALTER TABLE sites RENAME COLUMN proxy TO unsealed_proxy;

ALTER TABLE sites
    ADD COLUMN header_names TEXT[] NOT NULL DEFAULT '{}',
    -- scheme://[***:***@]host:port/
    ADD COLUMN proxy TEXT,
    -- JSON {"headers": {name: value}, "proxy": url}, sealed; both NULL: no secrets.
    ADD COLUMN secrets_nonce BYTEA,
    ADD COLUMN secrets_sealed BYTEA,
    ADD CONSTRAINT sites_secrets_whole CHECK ((secrets_nonce IS NULL) = (secrets_sealed IS NULL));

UPDATE sites
SET header_names = ARRAY(SELECT jsonb_object_keys(unsealed_headers) ORDER BY 1),
    proxy = regexp_replace(unsealed_proxy, '^([a-z0-9]+://)[^@/]*@', '\1***:***@');
