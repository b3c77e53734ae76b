-- Webhooks (docs/design.md, "Webhooks"): endpoints, an outbox of messages written in
-- the same transaction as the change that causes them, each message fanned out
-- at once to a delivery per endpoint that wants it, and every attempt of a
-- delivery. The scheduler's leader sends (src/scheduler/webhooks/).
CREATE TABLE webhooks (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url             TEXT NOT NULL,
    -- Event type names (run.failed, ...), sorted.
    events          TEXT[] NOT NULL CHECK (cardinality(events) > 0),
    -- Empty: every site / keyword.
    site_ids        BIGINT[] NOT NULL DEFAULT '{}',
    keyword_ids     BIGINT[] NOT NULL DEFAULT '{}',
    description     TEXT NOT NULL DEFAULT '',
    -- The signing secret (whsec_...), sealed with SESSION_KEY and bound to the row.
    secret_nonce    BYTEA NOT NULL,
    secret_sealed   BYTEA NOT NULL,
    enabled         BOOLEAN NOT NULL DEFAULT TRUE,
    -- Set when the sender disabled it (a whole retry schedule without success).
    disabled_at     TIMESTAMPTZ,
    disabled_reason TEXT,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One event, as sent: msg_id is the webhook-id header, body the exact bytes signed.
CREATE TABLE webhook_messages (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    msg_id      TEXT NOT NULL UNIQUE,
    event_type  TEXT NOT NULL,
    -- What it concerns (no foreign key: a message outlives a deleted site).
    site_id     BIGINT,
    keyword_id  BIGINT,
    body        TEXT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX webhook_messages_created ON webhook_messages (created_at);

-- A message to one endpoint.
CREATE TABLE webhook_deliveries (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id      BIGINT NOT NULL REFERENCES webhook_messages (id) ON DELETE CASCADE,
    webhook_id      BIGINT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    state           TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    -- Attempts of the current schedule (a resend starts a new one).
    attempts        INTEGER NOT NULL DEFAULT 0,
    -- When the current schedule began: queued, or resent.
    scheduled_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Pending: when it is due. Leased by a sender: pushed to the lease's end,
    -- so a sender that dies mid-send has it retried then.
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The sender holding it; its result is written only while it still does.
    lease           UUID,
    delivered_at    TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (message_id, webhook_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (webhook_id, next_attempt_at)
    WHERE state = 'pending';
CREATE INDEX webhook_deliveries_listing ON webhook_deliveries (webhook_id, id);
CREATE INDEX webhook_deliveries_delivered ON webhook_deliveries (webhook_id, delivered_at)
    WHERE state = 'delivered';

-- Every attempt of a delivery.
CREATE TABLE webhook_attempts (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id      BIGINT NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempted_at     TIMESTAMPTZ NOT NULL,
    -- The HTTP status, or NULL when there was no answer (error says why).
    status           INTEGER,
    error            TEXT,
    latency_ms       INTEGER NOT NULL,
    -- The start of the answer's body, capped.
    response_excerpt TEXT
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);
