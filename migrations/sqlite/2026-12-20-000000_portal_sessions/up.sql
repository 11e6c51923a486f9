-- The portal's state (docket_portal::PortalStore). SQLite twin of
-- migrations/postgres: times are UTC text in the one stored form, so they
-- compare as text; `roles` is a JSON array as TEXT. Session ids and login
-- states are kept by their SHA-256 (hex). Bounds repeat docket_portal's.

-- Logins in flight: taken (deleted) once by the callback, swept when expired.
CREATE TABLE portal_logins (
    state_hash TEXT PRIMARY KEY NOT NULL CHECK (length(state_hash) = 64),
    verifier TEXT NOT NULL CHECK (length(CAST(verifier AS BLOB)) BETWEEN 1 AND 2048),
    return_to TEXT NOT NULL CHECK (length(CAST(return_to AS BLOB)) BETWEEN 1 AND 2048),
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL CHECK (expires_at > created_at)
);

CREATE INDEX portal_logins_expires_at ON portal_logins (expires_at);

-- Signed-in browsers.
CREATE TABLE portal_sessions (
    id_hash TEXT PRIMARY KEY NOT NULL CHECK (length(id_hash) = 64),
    subject TEXT NOT NULL CHECK (length(CAST(subject AS BLOB)) BETWEEN 1 AND 512),
    display_name TEXT NOT NULL CHECK (length(CAST(display_name AS BLOB)) <= 512),
    roles TEXT NOT NULL CHECK (length(CAST(roles AS BLOB)) <= 16384 AND json_valid(roles)),
    administrator INTEGER NOT NULL CHECK (administrator IN (0, 1)),
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL CHECK (expires_at > created_at)
);

-- The per-person cap keeps each person's newest sessions; the sweep takes
-- expired ones.
CREATE INDEX portal_sessions_subject ON portal_sessions (subject, created_at DESC, id_hash DESC);
CREATE INDEX portal_sessions_expires_at ON portal_sessions (expires_at);
