-- Sessions of the earlier protocol era (2025-03-26 to 2025-11-25): what
-- `initialize` negotiated and who opened the session, so any replica serves
-- any session. Capabilities and client info are kept as the client sent them.
CREATE TABLE mcp_sessions (
    id text PRIMARY KEY,
    protocol_version text NOT NULL,
    client_capabilities text NOT NULL,
    client_info text,
    subject text NOT NULL,
    log_level text,
    created_at timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz NOT NULL DEFAULT now()
);

-- The sweep deletes sessions by their last use.
CREATE INDEX mcp_sessions_last_used_at ON mcp_sessions (last_used_at);
