DROP INDEX mcp_sessions_subject_last_used_at;
DROP TABLE mcp_session_questions;
CREATE TABLE mcp_session_answers (
    session_id text NOT NULL REFERENCES mcp_sessions (id) ON DELETE CASCADE,
    request_id text NOT NULL,
    answer text NOT NULL,
    taken boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, request_id)
);
