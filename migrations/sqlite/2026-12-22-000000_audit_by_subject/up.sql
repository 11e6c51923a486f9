-- The administrators' audit search by person reads a person's newest rows
-- through this index, as the search by tool reads (tool, created_at).
CREATE INDEX audit_logs_subject_created_at ON audit_logs (subject, created_at);
