-- Links to assets that open without a bearer token. SQLite twin of
-- migrations/postgres: times are UTC text to the millisecond, as everywhere in
-- this schema; `people` is a JSON array as TEXT. The bounds are
-- docket_catalog's, checked there first.
--
-- The keys asset download links are signed with, newest (highest `position`)
-- first; `replaces` is unique, so of two rotations from one key one lands.
CREATE TABLE link_keys (
    position INTEGER PRIMARY KEY,
    kid TEXT NOT NULL UNIQUE CHECK (length(CAST(kid AS BLOB)) BETWEEN 1 AND 64),
    replaces TEXT NOT NULL UNIQUE CHECK (length(CAST(replaces AS BLOB)) <= 64),
    secret TEXT NOT NULL CHECK (length(CAST(secret AS BLOB)) BETWEEN 1 AND 256),
    created_at TEXT NOT NULL
);

-- Shares of an asset for others: to named people, to anyone signed in, or
-- public. Every share expires; an open is counted on its row.
CREATE TABLE asset_shares (
    id TEXT PRIMARY KEY NOT NULL CHECK (length(CAST(id AS BLOB)) BETWEEN 1 AND 64),
    asset_id TEXT NOT NULL CHECK (length(CAST(asset_id AS BLOB)) BETWEEN 1 AND 2048),
    owner TEXT NOT NULL CHECK (length(CAST(owner AS BLOB)) BETWEEN 1 AND 2048),
    audience TEXT NOT NULL CHECK (audience IN ('people', 'signed_in', 'public')),
    people TEXT NOT NULL
        CHECK (length(CAST(people AS BLOB)) <= 65536 AND json_valid(people)
               AND json_type(people) = 'array'),
    expires_at TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    open_count INTEGER NOT NULL DEFAULT 0 CHECK (open_count >= 0),
    last_opened_at TEXT,
    CHECK (expires_at > created_at)
);

CREATE INDEX asset_shares_owner ON asset_shares (owner, created_at DESC, id DESC);
CREATE INDEX asset_shares_asset_id ON asset_shares (asset_id);
CREATE INDEX asset_shares_expires_at ON asset_shares (expires_at);
CREATE INDEX asset_shares_revoked_at ON asset_shares (revoked_at) WHERE revoked_at IS NOT NULL;
