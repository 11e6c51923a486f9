-- The HTTP status the upstream answered an API or GraphQL call with (docs/design.md,
-- Tools): api_export stores a non-2xx answer and reports it, so the catalog keeps it.
ALTER TABLE call_records ADD COLUMN upstream_status integer
    CHECK (upstream_status BETWEEN 100 AND 999);
