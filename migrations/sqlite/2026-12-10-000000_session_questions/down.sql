DROP INDEX mcp_sessions_subject_last_used_at;
DROP TABLE mcp_session_questions;
CREATE TABLE mcp_session_answers (
    session_id TEXT NOT NULL REFERENCES mcp_sessions (id) ON DELETE CASCADE,
    request_id TEXT NOT NULL,
    answer TEXT NOT NULL,
    taken BOOLEAN NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (session_id, request_id)
);
