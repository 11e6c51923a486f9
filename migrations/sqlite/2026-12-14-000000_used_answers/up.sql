-- Answers already used: an answer to a question the server asked in a sealed
-- requestState (a consent) runs its call once, on whichever replica it reaches.
-- A row lives as long as its seal could still be opened, then the sessions'
-- sweep deletes it.
CREATE TABLE used_answers (
    key TEXT PRIMARY KEY,
    expires_at TEXT NOT NULL
);
CREATE INDEX used_answers_expires_at ON used_answers (expires_at);
