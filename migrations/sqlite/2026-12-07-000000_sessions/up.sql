-- Sessions of the earlier protocol era (2025-03-26 to 2025-11-25): what
-- `initialize` negotiated and who opened the session. Capabilities and client
-- info are kept as the client sent them (JSON text); times are UTC text to the
-- millisecond, as everywhere in this schema.
CREATE TABLE mcp_sessions (
    id TEXT PRIMARY KEY NOT NULL,
    protocol_version TEXT NOT NULL,
    client_capabilities TEXT NOT NULL,
    client_info TEXT,
    subject TEXT NOT NULL,
    log_level TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    last_used_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- The sweep deletes sessions by their last use.
CREATE INDEX mcp_sessions_last_used_at ON mcp_sessions (last_used_at);
