-- How a site goes from one page to the next: {page} or a JSON token (the
-- default, what every earlier site does), {offset}, a next link, a "load
-- more" button or an endless scroll. A run may also stop paging on a page
-- that repeats the previous one: 'repeated_page'. Widening only: a worker
-- of the previous release reads no paging and never writes the new end.
ALTER TABLE sites ADD COLUMN paging JSONB NOT NULL DEFAULT '{"form": "numbered"}';
ALTER TABLE crawl_runs DROP CONSTRAINT crawl_runs_paging_ended_check;
ALTER TABLE crawl_runs ADD CONSTRAINT crawl_runs_paging_ended_check
    CHECK (paging_ended IN ('last_page', 'max_pages', 'seen_before', 'disallowed', 'item_cap',
                            'repeated_page'));
