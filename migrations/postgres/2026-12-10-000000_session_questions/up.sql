-- The server's questions to a session's client (elicitation), from the moment
-- one is asked until the call waiting for it takes the answer: an answer is
-- accepted only for a question that waits, once, so a client cannot fill the
-- table with answers to questions nobody asked. Replaces the answers table (an
-- answer in flight across this upgrade is lost; its call asks again when the
-- client makes it again).
DROP TABLE mcp_session_answers;
CREATE TABLE mcp_session_questions (
    session_id text NOT NULL REFERENCES mcp_sessions (id) ON DELETE CASCADE,
    request_id text NOT NULL,
    answer text,
    asked_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, request_id)
);

-- A subject's sessions by last use: a new session beyond the per-identity cap
-- ends the least recently used.
CREATE INDEX mcp_sessions_subject_last_used_at ON mcp_sessions (subject, last_used_at);
