-- Why an attempt failed, as a kind programs match on (domain::failure::FailureKind),
-- beside the message people read. Additive: a binary from before ignores it.
-- NULL on failures recorded before kinds existed.
ALTER TABLE crawl_runs ADD COLUMN error_kind TEXT;
ALTER TABLE crawl_attempts ADD COLUMN error_kind TEXT;
