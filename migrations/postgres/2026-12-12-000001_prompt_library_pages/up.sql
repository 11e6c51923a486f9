-- The prompt library is listed a page at a time, newest first, and an owner's
-- prompts are counted against the per-owner limit before each create.
CREATE INDEX prompt_library_newest ON prompt_library (created_at DESC, name DESC);
CREATE INDEX prompt_library_owner ON prompt_library (owner);
