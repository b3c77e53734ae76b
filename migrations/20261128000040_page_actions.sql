-- Steps a browser takes on a site's first page before reading it (a cookie
-- banner dismissed, the keyword typed into a search box). Widening only:
-- every earlier site has none.
ALTER TABLE sites ADD COLUMN actions JSONB NOT NULL DEFAULT '[]';
