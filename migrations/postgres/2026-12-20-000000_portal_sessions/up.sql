-- The portal's state (docket_portal::PortalStore), so that any replica serves
-- any step of a login and any request of a session. Session ids and login
-- states are kept by their SHA-256 (hex), never as given. Bounds repeat
-- docket_portal's, which are checked there first. Times are the caller's clock.

-- Logins in flight: taken (deleted) once by the callback, swept when expired.
CREATE TABLE portal_logins (
    state_hash text PRIMARY KEY CHECK (octet_length(state_hash) = 64),
    verifier text NOT NULL CHECK (octet_length(verifier) BETWEEN 1 AND 2048),
    return_to text NOT NULL CHECK (octet_length(return_to) BETWEEN 1 AND 2048),
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL CHECK (expires_at > created_at)
);

CREATE INDEX portal_logins_expires_at ON portal_logins (expires_at);

-- Signed-in browsers. `roles` is a JSON array as text (at most 64 roles of 128
-- bytes), read back exactly as written; nothing queries inside it.
CREATE TABLE portal_sessions (
    id_hash text PRIMARY KEY CHECK (octet_length(id_hash) = 64),
    subject text NOT NULL CHECK (octet_length(subject) BETWEEN 1 AND 512),
    display_name text NOT NULL CHECK (octet_length(display_name) <= 512),
    roles text NOT NULL CHECK (octet_length(roles) <= 16384),
    administrator boolean NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL CHECK (expires_at > created_at)
);

-- The per-person cap keeps each person's newest sessions; the sweep takes
-- expired ones.
CREATE INDEX portal_sessions_subject ON portal_sessions (subject, created_at DESC, id_hash DESC);
CREATE INDEX portal_sessions_expires_at ON portal_sessions (expires_at);
