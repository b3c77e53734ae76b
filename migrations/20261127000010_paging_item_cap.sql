-- A run may also stop paging because it holds as many items as a run may
-- keep (RUN_MAX_ITEMS): 'item_cap'. Widening only: a worker of the previous
-- release never writes it.
ALTER TABLE crawl_runs DROP CONSTRAINT crawl_runs_paging_ended_check;
ALTER TABLE crawl_runs ADD CONSTRAINT crawl_runs_paging_ended_check
    CHECK (paging_ended IN ('last_page', 'max_pages', 'seen_before', 'disallowed', 'item_cap'));
