-- A site whose first page must have items: none means the site changed (its
-- selectors find nothing), and the attempt fails with error_kind no_items.
ALTER TABLE sites ADD COLUMN expect_items BOOLEAN NOT NULL DEFAULT false;
