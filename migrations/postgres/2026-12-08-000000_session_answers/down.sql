DROP TABLE mcp_session_answers;
