-- A site's items can be the structured items of one schema.org type on each
-- page (JSON-LD, microdata) instead of the elements an item selector finds:
-- such a site has structured_items and no item_selector. Widening only.
ALTER TABLE sites ADD COLUMN structured_items TEXT;
