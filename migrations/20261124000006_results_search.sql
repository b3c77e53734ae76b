-- The console's results browser: full-text search over the string values of
-- an item's fields ('simple': no stemming, any language split on spaces), and
-- items by when they were first seen.
CREATE INDEX crawl_results_fields_text
    ON crawl_results USING gin (jsonb_to_tsvector('simple', fields, '["string"]'));
CREATE INDEX seen_items_first_seen ON seen_items (first_seen_at);
