-- Result spools (issue 39). SQLite twin of migrations/postgres: times are UTC
-- text to the millisecond, as everywhere in this schema. The bounds are
-- docket_catalog's, checked there first.
CREATE TABLE result_spools (
    id TEXT PRIMARY KEY NOT NULL CHECK (length(CAST(id AS BLOB)) = 32),
    owner TEXT NOT NULL CHECK (length(CAST(owner AS BLOB)) BETWEEN 1 AND 512),
    tool TEXT NOT NULL CHECK (length(CAST(tool AS BLOB)) BETWEEN 1 AND 128),
    connection TEXT NOT NULL CHECK (length(CAST(connection AS BLOB)) <= 128),
    columns TEXT NOT NULL CHECK (length(CAST(columns AS BLOB)) <= 262144),
    source_id TEXT CHECK (length(CAST(source_id AS BLOB)) <= 256),
    chunks INTEGER NOT NULL DEFAULT 0 CHECK (chunks >= 0),
    row_count INTEGER NOT NULL DEFAULT 0 CHECK (row_count >= 0),
    byte_count INTEGER NOT NULL DEFAULT 0 CHECK (byte_count >= 0),
    state TEXT NOT NULL DEFAULT 'filling'
        CHECK (state IN ('filling', 'complete', 'cut', 'failed')),
    error TEXT CHECK (length(CAST(error AS BLOB)) <= 1024),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    CHECK (expires_at > created_at)
);

CREATE INDEX result_spools_owner ON result_spools (owner, expires_at);
CREATE INDEX result_spools_expires_at ON result_spools (expires_at);
