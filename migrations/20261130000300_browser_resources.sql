-- What a site's browser pages download besides what reading them needs:
-- the names of the kinds allowed again (`image`, `media`, `font`,
-- `tracker`); none by default, so a page loads without its images, media,
-- web fonts and requests to known tracker and ad hosts.
ALTER TABLE sites ADD COLUMN browser_resources TEXT[] NOT NULL DEFAULT '{}'
    CHECK (browser_resources <@ ARRAY['image', 'media', 'font', 'tracker']::TEXT[]);
