-- Detail pages: a site may name the list field holding each item's detail
-- URL and the fields read there (the spec as the rules accepted it), and an
-- item remembers when its detail page was last read, so a re-run reads only
-- what the site's read setting asks for.
ALTER TABLE sites ADD COLUMN detail JSONB;
ALTER TABLE items ADD COLUMN detail_read_at TIMESTAMPTZ;
