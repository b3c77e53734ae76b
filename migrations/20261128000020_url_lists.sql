-- A site can be crawled from a list of URLs (products to refresh, pages to
-- watch) as well as from keyword searches. A list belongs to one site and fires
-- on its own schedule, read like a keyword's (cron on the clocks of `timezone`,
-- spread by `jitter_secs`, `last_fired_at` the nominal time of its latest fire).
-- Its URLs are rows of their own, replaced in bulk: a URL kept across a
-- replacement keeps when it was last read, so it is read once per period.
CREATE TABLE url_lists (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    site_id       BIGINT NOT NULL REFERENCES sites (id) ON DELETE CASCADE,
    name          TEXT NOT NULL,
    schedule      TEXT NOT NULL,
    timezone      TEXT NOT NULL DEFAULT 'UTC',
    jitter_secs   INTEGER NOT NULL DEFAULT 0
        CONSTRAINT url_lists_jitter_check CHECK (jitter_secs BETWEEN 0 AND 3600),
    enabled       BOOLEAN NOT NULL DEFAULT TRUE,
    last_fired_at TIMESTAMPTZ,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT url_lists_name_unique UNIQUE (site_id, name)
);

-- One URL of a list: `line` is where the latest upload had it (the order it is
-- read in), `last_read_at` when a run last stored its page.
CREATE TABLE url_list_entries (
    list_id      BIGINT NOT NULL REFERENCES url_lists (id) ON DELETE CASCADE,
    url          TEXT NOT NULL,
    line         INTEGER NOT NULL,
    added_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_read_at TIMESTAMPTZ,
    PRIMARY KEY (list_id, url)
);
CREATE INDEX url_list_entries_order ON url_list_entries (list_id, line);
