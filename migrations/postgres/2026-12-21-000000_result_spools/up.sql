-- Result spools (issue 39): the rest of a cut answer, which its caller reads on
-- with a cursor instead of running the query again. The rows of a spool are
-- chunks in the object store; this row says whose it is, how far its writer got
-- and whether it is whole. Times are the replica's (the caller's), as for links.
CREATE TABLE result_spools (
    id text PRIMARY KEY CHECK (length(id) = 32),
    owner text NOT NULL CHECK (octet_length(owner) BETWEEN 1 AND 512),
    tool text NOT NULL CHECK (octet_length(tool) BETWEEN 1 AND 128),
    connection text NOT NULL CHECK (octet_length(connection) <= 128),
    columns text NOT NULL CHECK (octet_length(columns) <= 262144),
    source_id text CHECK (octet_length(source_id) <= 256),
    chunks bigint NOT NULL DEFAULT 0 CHECK (chunks >= 0),
    row_count bigint NOT NULL DEFAULT 0 CHECK (row_count >= 0),
    byte_count bigint NOT NULL DEFAULT 0 CHECK (byte_count >= 0),
    state text NOT NULL DEFAULT 'filling'
        CHECK (state IN ('filling', 'complete', 'cut', 'failed')),
    error text CHECK (octet_length(error) <= 1024),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    CHECK (expires_at > created_at)
);

-- The per-owner cap counts an owner's live spools; the sweep finds expired ones.
CREATE INDEX result_spools_owner ON result_spools (owner, expires_at);
CREATE INDEX result_spools_expires_at ON result_spools (expires_at);
