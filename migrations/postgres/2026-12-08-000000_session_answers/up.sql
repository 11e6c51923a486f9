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
