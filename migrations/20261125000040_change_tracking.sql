-- Change tracking (docs/design.md, "Change tracking"): each item of a keyword/site is identified by its
-- URL, else by the value of a field the site names (`item_key`), else by its
-- content. The store keeps each item's current fields and every value it had;
-- each result says whether its item was new, changed (with the old and new
-- value of each changed field) or unchanged; a run that read every page also
-- records the stored items it no longer found (removed).

-- The field whose value identifies an item that has no URL (a SKU, an id).
ALTER TABLE sites ADD COLUMN item_key TEXT;

-- The old and new value of each field that differs between two values of an
-- item, {"price": {"old": "$5", "new": "$6"}}; a field only one side has shows
-- null on the other. The diff a changed result and its item carry.
CREATE FUNCTION field_diff(old_fields JSONB, new_fields JSONB) RETURNS JSONB
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT COALESCE(jsonb_object_agg(name, jsonb_build_object('old', old_fields -> name,
                                                              'new', new_fields -> name)), '{}')
    FROM (SELECT jsonb_object_keys(old_fields) UNION SELECT jsonb_object_keys(new_fields)) AS names(name)
    WHERE old_fields -> name IS DISTINCT FROM new_fields -> name
$$;

-- One row per item of a keyword/site, as it was last seen. It supersedes
-- seen_items (first and last sighting by key), which is no longer written and
-- is kept only for binaries from before during a rolling deploy.
-- Every run rewrites the rows of the items it sees: nothing it rewrites is
-- indexed, and the free space left in each page lets those be HOT updates.
CREATE TABLE items (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    keyword_id      BIGINT NOT NULL REFERENCES keywords (id) ON DELETE CASCADE,
    site_id         BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    identified_by   TEXT NOT NULL CHECK (identified_by IN ('url', 'key', 'content')),
    -- As crawl_results.item_key: the URL, 'key:' and the key field's value, or
    -- the content hash.
    item_key        TEXT NOT NULL,
    item_url        TEXT,
    fields          JSONB NOT NULL,
    content_hash    TEXT NOT NULL,
    first_seen_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_changed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Set by the run that read every page and did not find it; cleared when
    -- it is seen again.
    removed_at      TIMESTAMPTZ,
    -- Where it was last seen: what a removal shows of it.
    last_page       INTEGER NOT NULL,
    last_position   INTEGER NOT NULL,
    last_page_url   TEXT NOT NULL,
    -- The run that last saw it and what that run recorded (a result's change
    -- and diff), so the same run seeing it again (a retried page, an item on
    -- two pages) records the same and counts it once. Not a reference: runs
    -- go by retention, items by their own.
    last_run_id     BIGINT,
    last_change     TEXT CHECK (last_change IN ('new', 'changed', 'unchanged')),
    last_diff       JSONB,
    UNIQUE (keyword_id, site_id, item_key)
) WITH (fillfactor = 70);
-- No index but these two: nothing reads items by time but retention (once
-- a day), and an index on what a sighting rewrites would cost every run.

-- Every value an item had, from when it was first seen with it.
CREATE TABLE item_history (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    item_id      BIGINT NOT NULL REFERENCES items (id) ON DELETE CASCADE,
    -- The run that saw it (not a reference: the history outlives runs).
    run_id       BIGINT,
    fields       JSONB NOT NULL,
    content_hash TEXT NOT NULL,
    seen_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX item_history_item ON item_history (item_id, id);

-- What a result's item was to its run. NULL on results stored before change
-- tracking. item_id is not a reference: an item forgotten by retention
-- leaves its results as they were.
ALTER TABLE crawl_results
    ADD COLUMN item_id BIGINT,
    ADD COLUMN change  TEXT CHECK (change IN ('new', 'changed', 'unchanged')),
    ADD COLUMN diff    JSONB;
-- ?change=new|changed, newest first or after a cursor.
CREATE INDEX crawl_results_changes ON crawl_results (change, id) WHERE change IN ('new', 'changed');

-- The items a run found gone, as they were last seen.
CREATE TABLE item_removals (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id        BIGINT NOT NULL REFERENCES crawl_runs (id) ON DELETE CASCADE,
    item_id       BIGINT NOT NULL REFERENCES items (id) ON DELETE CASCADE,
    keyword_id    BIGINT NOT NULL,
    site_id       BIGINT NOT NULL,
    item_key      TEXT NOT NULL,
    item_url      TEXT,
    fields        JSONB NOT NULL,
    content_hash  TEXT NOT NULL,
    page          INTEGER NOT NULL,
    position      INTEGER NOT NULL,
    page_url      TEXT NOT NULL,
    first_seen_at TIMESTAMPTZ NOT NULL,
    last_seen_at  TIMESTAMPTZ NOT NULL,
    removed_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX item_removals_run ON item_removals (run_id, id);
CREATE INDEX item_removals_keyword ON item_removals (keyword_id, id);
CREATE INDEX item_removals_site ON item_removals (site_id, id);
CREATE INDEX item_removals_item ON item_removals (item_id);

-- A run's items by what they were to it, and why its paging ended:
-- last_page (no next page: removals were judged), max_pages or seen_before
-- (stop_on_seen). NULL until it completes.
ALTER TABLE crawl_runs
    ADD COLUMN items_new     INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN items_changed INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN items_removed INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN paging_ended  TEXT CHECK (paging_ended IN ('last_page', 'max_pages', 'seen_before', 'disallowed'));

-- The items stored before: each (keyword, site, key) of the results kept,
-- with the fields of its latest result and its first and last sighting, and
-- one history entry per distinct value those results hold (a value an item
-- had twice, apart, shows once). Results stored before keep change NULL.
INSERT INTO items (keyword_id, site_id, identified_by, item_key, item_url, fields, content_hash,
                   first_seen_at, last_seen_at, last_changed_at, last_page, last_position,
                   last_page_url)
SELECT latest.keyword_id, latest.site_id,
       CASE WHEN latest.item_url IS NOT NULL AND latest.item_url = latest.item_key THEN 'url' ELSE 'content' END,
       latest.item_key, latest.item_url, latest.fields, latest.content_hash,
       LEAST(s.first_seen_at, span.first_seen_at), GREATEST(s.last_seen_at, span.last_seen_at),
       latest.fetched_at, latest.page, latest.position, latest.page_url
FROM (SELECT DISTINCT ON (keyword_id, site_id, item_key) *
      FROM crawl_results
      ORDER BY keyword_id, site_id, item_key, id DESC) AS latest
JOIN (SELECT keyword_id, site_id, item_key, min(fetched_at) AS first_seen_at, max(fetched_at) AS last_seen_at
      FROM crawl_results GROUP BY keyword_id, site_id, item_key) AS span
  ON span.keyword_id = latest.keyword_id AND span.site_id = latest.site_id AND span.item_key = latest.item_key
LEFT JOIN seen_items s
  ON s.keyword_id = latest.keyword_id AND s.site_id = latest.site_id AND s.item_key = latest.item_key;

-- In the order they were seen: the history is read newest (highest id) first.
INSERT INTO item_history (item_id, run_id, fields, content_hash, seen_at)
SELECT item_id, run_id, fields, content_hash, seen_at
FROM (SELECT DISTINCT ON (i.id, r.content_hash)
             i.id AS item_id, r.run_id, r.fields, r.content_hash, r.fetched_at AS seen_at, r.id AS result_id
      FROM crawl_results r
      JOIN items i ON i.keyword_id = r.keyword_id AND i.site_id = r.site_id AND i.item_key = r.item_key
      ORDER BY i.id, r.content_hash, r.id) AS first_sightings
ORDER BY seen_at, result_id;

UPDATE items i SET last_changed_at = h.seen_at
FROM (SELECT item_id, max(seen_at) AS seen_at FROM item_history GROUP BY item_id) AS h
WHERE h.item_id = i.id;
