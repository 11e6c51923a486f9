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

-- A client's answers to the server's requests (elicitation), kept until the call
-- that waits for them, on whichever replica runs it, takes them. A taken answer
-- stays (taken) with its session, so a request is answered once.
CREATE TABLE mcp_session_answers (
    session_id text NOT NULL REFERENCES mcp_sessions (id) ON DELETE CASCADE,
    request_id text NOT NULL,
    answer text NOT NULL,
    taken boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, request_id)
);
