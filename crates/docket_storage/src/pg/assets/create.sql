-- Records an asset unless its owner already has one with the same idempotency
-- key: then nothing is written and no row comes back (the caller reads the
-- existing asset in a statement of its own, whose snapshot sees it even when it
-- was committed by a concurrent insert this one waited for). A conflict on the
-- id alone still fails, as a unique violation. created_at is now().
-- $1 id, $2 owner, $3 name, $4 description, $5 tags, $6 format, $7 content_type,
-- $8 storage_key, $9 size_bytes, $10 row_count, $11 connection, $12 tool,
-- $13 idempotency_key, $14 task_id, $15 call_id.
INSERT INTO assets (
    id, owner, name, description, tags, format, content_type, storage_key, size_bytes,
    row_count, connection, tool, idempotency_key, task_id, call_id
) VALUES (
    $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15
)
ON CONFLICT (owner, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
RETURNING
    id, owner, name, description, tags, format, content_type, storage_key, size_bytes,
    row_count, connection, tool, idempotency_key, task_id, call_id, created_at
