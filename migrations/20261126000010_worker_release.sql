-- What each worker process is a release of (on ECS its task definition and
-- revision), so a worker replaced by a deployment stops holding it up.
-- Additive: a worker of the previous release announces without it.
ALTER TABLE workers ADD COLUMN release TEXT NOT NULL DEFAULT '';
