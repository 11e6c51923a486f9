-- The prompt library: prompts a team keeps, one namespace of names for the
-- server. Arguments, scripts and who it is shared with are JSON text, read and
-- written whole.
CREATE TABLE prompt_library (
    name text PRIMARY KEY,
    owner text NOT NULL,
    description text NOT NULL,
    template text NOT NULL,
    arguments text NOT NULL,
    scripts text NOT NULL,
    shared_with text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
