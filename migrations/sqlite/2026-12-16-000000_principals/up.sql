-- The principal directory: what each signed-in person's verified token claims
-- were when they were last seen, one row per subject (`oidc:<sub>`), so a script
-- run (a scheduled one too, which no person starts) acts upstream as its owner
-- by any claim. SQLite twin of migrations/postgres: the claims are a JSON object
-- as TEXT; times are UTC text to the millisecond, as everywhere in this schema.
-- The bounds are docket_catalog's, checked there first.
CREATE TABLE principals (
    subject TEXT PRIMARY KEY NOT NULL
        CHECK (length(CAST(subject AS BLOB)) BETWEEN 1 AND 512),
    claims TEXT NOT NULL
        CHECK (length(CAST(claims AS BLOB)) <= 16384 AND json_valid(claims)
               AND json_type(claims) = 'object'),
    seen_at TEXT NOT NULL
);

-- The retention pass forgets those seen longest ago first.
CREATE INDEX principals_seen_at ON principals (seen_at);
