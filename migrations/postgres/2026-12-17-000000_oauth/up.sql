-- The authorization server's state (docket_oauth::OAuthStore), so that any
-- replica serves any step of a login. Codes and refresh tokens are kept by the
-- SHA-256 of their value, never as given. Payloads are JSON text, not jsonb, so
-- they read back exactly as written; nothing queries inside them. Keys are 1 to
-- 2048 bytes and payloads at most 16 KiB (docket_oauth's bounds, checked there
-- first). Times are the caller's clock.

-- Clients registered at run time (RFC 7591). Metadata-document and configured
-- clients are not stored, so consents and refresh tokens do not reference this
-- table.
CREATE TABLE oauth_clients (
    client_id text PRIMARY KEY CHECK (octet_length(client_id) BETWEEN 1 AND 2048),
    metadata text NOT NULL CHECK (octet_length(metadata) <= 16384),
    secret_hash text CHECK (octet_length(secret_hash) BETWEEN 1 AND 2048),
    registered_at timestamptz NOT NULL,
    last_used_at timestamptz
);

-- Reaping: clients never used since they registered, and clients idle since.
CREATE INDEX oauth_clients_unused ON oauth_clients (registered_at) WHERE last_used_at IS NULL;
CREATE INDEX oauth_clients_last_used ON oauth_clients (last_used_at)
    WHERE last_used_at IS NOT NULL;

-- One-shot records: authorizations in flight and codes. Taking one stamps
-- `taken_at` (compare-and-set on NULL); the row stays until it expires so a
-- second presentation reads as a replay.
CREATE TABLE oauth_once_records (
    kind text NOT NULL CHECK (kind IN ('pending', 'code')),
    key text NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 2048),
    payload text NOT NULL CHECK (octet_length(payload) <= 16384),
    expires_at timestamptz NOT NULL,
    taken_at timestamptz,
    PRIMARY KEY (kind, key)
);

-- The per-kind cap counts unexpired records; the purge takes expired ones.
CREATE INDEX oauth_once_records_kind_expires_at ON oauth_once_records (kind, expires_at);
CREATE INDEX oauth_once_records_expires_at ON oauth_once_records (expires_at);

-- Refresh-token families: one per login, revoked as a whole on reuse, by
-- RFC 7009 or when its subject holds too many.
CREATE TABLE oauth_refresh_families (
    family text PRIMARY KEY CHECK (octet_length(family) BETWEEN 1 AND 2048),
    client_id text NOT NULL CHECK (octet_length(client_id) BETWEEN 1 AND 2048),
    subject text NOT NULL CHECK (octet_length(subject) BETWEEN 1 AND 2048),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz
);

-- The cap of live families per subject, newest kept.
CREATE INDEX oauth_refresh_families_subject ON oauth_refresh_families (subject, created_at)
    WHERE revoked_at IS NULL;
-- Reaping a client deletes its families (and so their tokens).
CREATE INDEX oauth_refresh_families_client_id ON oauth_refresh_families (client_id);
-- The purge takes expired and revoked families.
CREATE INDEX oauth_refresh_families_expires_at ON oauth_refresh_families (expires_at);
CREATE INDEX oauth_refresh_families_revoked ON oauth_refresh_families (revoked_at)
    WHERE revoked_at IS NOT NULL;

-- Each token of a family. A rotation stamps the presented token's `used_at`
-- (compare-and-set on NULL) and inserts the next one; replaced tokens stay
-- until the family ends, so presenting one again is caught as reuse.
CREATE TABLE oauth_refresh_tokens (
    token_hash text PRIMARY KEY CHECK (octet_length(token_hash) BETWEEN 1 AND 2048),
    family text NOT NULL REFERENCES oauth_refresh_families (family) ON DELETE CASCADE,
    client_id text NOT NULL CHECK (octet_length(client_id) BETWEEN 1 AND 2048),
    subject text NOT NULL CHECK (octet_length(subject) BETWEEN 1 AND 2048),
    grant_payload text NOT NULL CHECK (octet_length(grant_payload) <= 16384),
    issued_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at timestamptz
);

-- A family's tokens: revocation counts them, the purge and the cascade delete them.
CREATE INDEX oauth_refresh_tokens_family ON oauth_refresh_tokens (family);

-- Consents, per subject and client (any kind of client).
CREATE TABLE oauth_consents (
    subject text NOT NULL CHECK (octet_length(subject) BETWEEN 1 AND 2048),
    client_id text NOT NULL CHECK (octet_length(client_id) BETWEEN 1 AND 2048),
    consented_at timestamptz NOT NULL,
    PRIMARY KEY (subject, client_id)
);

-- Reaping a client deletes its consents.
CREATE INDEX oauth_consents_client_id ON oauth_consents (client_id);

-- Signing keys, newest (highest `position`) first. Each key names the key that
-- was newest when it was added (`replaces`, '' for the first), and that column
-- is unique: of replicas rotating from one key at once, one insert lands.
CREATE TABLE oauth_signing_keys (
    position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kid text NOT NULL UNIQUE CHECK (octet_length(kid) BETWEEN 1 AND 2048),
    replaces text NOT NULL UNIQUE CHECK (octet_length(replaces) <= 2048),
    private_pkcs8 text NOT NULL CHECK (octet_length(private_pkcs8) BETWEEN 1 AND 16384),
    public_jwk text NOT NULL CHECK (octet_length(public_jwk) <= 16384),
    created_at timestamptz NOT NULL
);

-- Removing old keys compares their age.
CREATE INDEX oauth_signing_keys_created_at ON oauth_signing_keys (created_at);
