DROP TABLE mcp_session_answers;
DROP TABLE mcp_sessions;
