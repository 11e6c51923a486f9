-- The authorization server's state (docket_oauth::OAuthStore). SQLite twin of
-- migrations/postgres: payloads are JSON as TEXT; times are UTC text to the
-- millisecond, as everywhere in this schema, so they compare as text. Keys are
-- 1 to 2048 bytes and payloads at most 16 KiB (docket_oauth's bounds, checked
-- there first). Times are the caller's clock.

-- Clients registered at run time (RFC 7591); metadata-document and configured
-- clients are not stored.
CREATE TABLE oauth_clients (
    client_id TEXT PRIMARY KEY NOT NULL
        CHECK (length(CAST(client_id AS BLOB)) BETWEEN 1 AND 2048),
    metadata TEXT NOT NULL
        CHECK (length(CAST(metadata AS BLOB)) <= 16384 AND json_valid(metadata)),
    secret_hash TEXT CHECK (length(CAST(secret_hash AS BLOB)) BETWEEN 1 AND 2048),
    registered_at TEXT NOT NULL,
    last_used_at TEXT
);

-- Reaping: clients never used since they registered, and clients idle since.
CREATE INDEX oauth_clients_unused ON oauth_clients (registered_at) WHERE last_used_at IS NULL;
CREATE INDEX oauth_clients_last_used ON oauth_clients (last_used_at)
    WHERE last_used_at IS NOT NULL;

-- One-shot records: authorizations in flight and codes; `taken_at` is stamped
-- by the first take, and the row stays until it expires so a replay shows.
CREATE TABLE oauth_once_records (
    kind TEXT NOT NULL CHECK (kind IN ('pending', 'code')),
    key TEXT NOT NULL CHECK (length(CAST(key AS BLOB)) BETWEEN 1 AND 2048),
    payload TEXT NOT NULL
        CHECK (length(CAST(payload AS BLOB)) <= 16384 AND json_valid(payload)),
    expires_at TEXT NOT NULL,
    taken_at TEXT,
    PRIMARY KEY (kind, key)
);

-- The per-kind cap counts unexpired records; the purge takes expired ones.
CREATE INDEX oauth_once_records_kind_expires_at ON oauth_once_records (kind, expires_at);
CREATE INDEX oauth_once_records_expires_at ON oauth_once_records (expires_at);

-- Refresh-token families: one per login, revoked as a whole.
CREATE TABLE oauth_refresh_families (
    family TEXT PRIMARY KEY NOT NULL CHECK (length(CAST(family AS BLOB)) BETWEEN 1 AND 2048),
    client_id TEXT NOT NULL CHECK (length(CAST(client_id AS BLOB)) BETWEEN 1 AND 2048),
    subject TEXT NOT NULL CHECK (length(CAST(subject AS BLOB)) BETWEEN 1 AND 2048),
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    revoked_at TEXT
);

-- The cap of live families per subject; reaping by client; the purge.
CREATE INDEX oauth_refresh_families_subject ON oauth_refresh_families (subject, created_at)
    WHERE revoked_at IS NULL;
CREATE INDEX oauth_refresh_families_client_id ON oauth_refresh_families (client_id);
CREATE INDEX oauth_refresh_families_expires_at ON oauth_refresh_families (expires_at);
CREATE INDEX oauth_refresh_families_revoked ON oauth_refresh_families (revoked_at)
    WHERE revoked_at IS NOT NULL;

-- Each token of a family; replaced ones (`used_at`) stay until the family
-- ends, so presenting one again is caught as reuse.
CREATE TABLE oauth_refresh_tokens (
    token_hash TEXT PRIMARY KEY NOT NULL
        CHECK (length(CAST(token_hash AS BLOB)) BETWEEN 1 AND 2048),
    family TEXT NOT NULL REFERENCES oauth_refresh_families (family) ON DELETE CASCADE,
    client_id TEXT NOT NULL CHECK (length(CAST(client_id AS BLOB)) BETWEEN 1 AND 2048),
    subject TEXT NOT NULL CHECK (length(CAST(subject AS BLOB)) BETWEEN 1 AND 2048),
    grant_payload TEXT NOT NULL
        CHECK (length(CAST(grant_payload AS BLOB)) <= 16384 AND json_valid(grant_payload)),
    issued_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    used_at TEXT
);

CREATE INDEX oauth_refresh_tokens_family ON oauth_refresh_tokens (family);

-- Consents, per subject and client (any kind of client).
CREATE TABLE oauth_consents (
    subject TEXT NOT NULL CHECK (length(CAST(subject AS BLOB)) BETWEEN 1 AND 2048),
    client_id TEXT NOT NULL CHECK (length(CAST(client_id AS BLOB)) BETWEEN 1 AND 2048),
    consented_at TEXT NOT NULL,
    PRIMARY KEY (subject, client_id)
);

CREATE INDEX oauth_consents_client_id ON oauth_consents (client_id);

-- Signing keys, newest (highest `position`) first; `replaces` (unique) names
-- the key that was newest when this one was added ('' for the first).
CREATE TABLE oauth_signing_keys (
    position INTEGER PRIMARY KEY,
    kid TEXT NOT NULL UNIQUE CHECK (length(CAST(kid AS BLOB)) BETWEEN 1 AND 2048),
    replaces TEXT NOT NULL UNIQUE CHECK (length(CAST(replaces AS BLOB)) <= 2048),
    private_pkcs8 TEXT NOT NULL
        CHECK (length(CAST(private_pkcs8 AS BLOB)) BETWEEN 1 AND 16384),
    public_jwk TEXT NOT NULL
        CHECK (length(CAST(public_jwk AS BLOB)) <= 16384 AND json_valid(public_jwk)),
    created_at TEXT NOT NULL
);

CREATE INDEX oauth_signing_keys_created_at ON oauth_signing_keys (created_at);
