-- The principal directory: what each signed-in person's verified token claims
-- were when they were last seen, one row per subject (`oidc:<sub>`), so a script
-- run (a scheduled one too, which no person starts) acts upstream as its owner
-- by any claim. The claims are JSON text, not jsonb, so they read back exactly
-- as written (jsonb refuses \u0000 in a string and rewrites numbers); nothing
-- queries inside them. The bounds are docket_catalog's, checked there first.
CREATE TABLE principals (
    subject text PRIMARY KEY CHECK (octet_length(subject) BETWEEN 1 AND 512),
    claims text NOT NULL CHECK (octet_length(claims) <= 16384),
    seen_at timestamptz NOT NULL
);

-- The retention pass forgets those seen longest ago first.
CREATE INDEX principals_seen_at ON principals (seen_at);
