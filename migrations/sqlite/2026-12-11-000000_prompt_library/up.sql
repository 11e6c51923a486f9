-- The prompt library: prompts a team keeps, one namespace of names for the
-- server. Arguments, scripts and who it is shared with are JSON text, read and
-- written whole.
CREATE TABLE prompt_library (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    description TEXT NOT NULL,
    template TEXT NOT NULL,
    arguments TEXT NOT NULL,
    scripts TEXT NOT NULL,
    shared_with TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
