-- A site's proxy pool (instead of its one `proxy`): its members, each with
-- its weight, and its rotation, as responses show it: a member's user name
-- and password masked. A member with credentials is sealed in full with the
-- site's other secrets (`secrets_sealed`). NULL: no pool.
ALTER TABLE sites ADD COLUMN proxy_pool JSONB;
