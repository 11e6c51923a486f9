-- Links to assets that open without a bearer token.
--
-- The keys asset download links are signed with (HMAC-SHA-256), newest
-- (highest `position`) first, so every replica signs and verifies with the same
-- keys and none needs configuring. Each key names the key that was newest when
-- it was added (`replaces`, '' for the first), and that column is unique: of
-- replicas rotating from one key at once, one insert lands. The bounds are
-- docket_catalog's, checked there first.
CREATE TABLE link_keys (
    position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kid text NOT NULL UNIQUE CHECK (octet_length(kid) BETWEEN 1 AND 64),
    replaces text NOT NULL UNIQUE CHECK (octet_length(replaces) <= 64),
    secret text NOT NULL CHECK (octet_length(secret) BETWEEN 1 AND 256),
    created_at timestamptz NOT NULL
);

-- Shares of an asset for others: to named people (`people`, a JSON array of
-- subjects), to anyone signed in, or public. Every share expires; an open is
-- counted on its row. Times are the server's clock, as the principals' are.
CREATE TABLE asset_shares (
    id text PRIMARY KEY CHECK (octet_length(id) BETWEEN 1 AND 64),
    asset_id text NOT NULL CHECK (octet_length(asset_id) BETWEEN 1 AND 2048),
    owner text NOT NULL CHECK (octet_length(owner) BETWEEN 1 AND 2048),
    audience text NOT NULL CHECK (audience IN ('people', 'signed_in', 'public')),
    people text NOT NULL CHECK (octet_length(people) <= 65536),
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz,
    open_count bigint NOT NULL DEFAULT 0 CHECK (open_count >= 0),
    last_opened_at timestamptz,
    CHECK (expires_at > created_at)
);

-- An owner's shares (of one asset), newest first; the cap counts them.
CREATE INDEX asset_shares_owner ON asset_shares (owner, created_at DESC, id DESC);
CREATE INDEX asset_shares_asset_id ON asset_shares (asset_id);
-- The retention pass finds the ended ones.
CREATE INDEX asset_shares_expires_at ON asset_shares (expires_at);
CREATE INDEX asset_shares_revoked_at ON asset_shares (revoked_at) WHERE revoked_at IS NOT NULL;
