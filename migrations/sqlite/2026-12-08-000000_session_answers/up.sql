-- A client's answers to the server's requests (elicitation), kept until the call
-- that waits for them takes them. A taken answer stays (taken) with its
-- session, so a request is answered once.
CREATE TABLE mcp_session_answers (
    session_id TEXT NOT NULL REFERENCES mcp_sessions (id) ON DELETE CASCADE,
    request_id TEXT NOT NULL,
    answer TEXT NOT NULL,
    taken BOOLEAN NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (session_id, request_id)
);
