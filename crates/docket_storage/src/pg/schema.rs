//! The PostgreSQL tables as diesel sees them (mirrors `migrations/postgres/`).

diesel::table! {
    /// One row per task.
    call_tasks (task_id) {
        task_id -> Text,
        tool -> Text,
        arguments -> Jsonb,
        owner -> Text,
        extra_follower -> Nullable<Text>,
        replica_id -> Text,
        status -> Text,
        status_message -> Nullable<Text>,
        created_at -> Timestamptz,
        last_updated_at -> Timestamptz,
        heartbeat_at -> Timestamptz,
        cancel_requested_at -> Nullable<Timestamptz>,
        result -> Nullable<Jsonb>,
        error -> Nullable<Jsonb>,
        input_requests -> Nullable<Jsonb>,
        input_answers -> Jsonb,
        requested_input_keys -> Jsonb,
        expires_at -> Nullable<Timestamptz>,
        poll_interval_ms -> BigInt,
        audit_persona -> Nullable<Text>,
        audit_connection -> Nullable<Text>,
        audit_arguments -> Jsonb,
    }
}

diesel::table! {
    /// One row per call that ended.
    audit_logs (id) {
        id -> BigInt,
        created_at -> Timestamptz,
        tool -> Text,
        subject -> Text,
        persona -> Nullable<Text>,
        connection -> Nullable<Text>,
        arguments -> Jsonb,
        success -> Bool,
        outcome -> Text,
        error_message -> Nullable<Text>,
        duration_ms -> BigInt,
    }
}

diesel::table! {
    /// One row per exported object.
    assets (id) {
        id -> Text,
        owner -> Text,
        name -> Text,
        description -> Nullable<Text>,
        tags -> Jsonb,
        format -> Text,
        content_type -> Text,
        storage_key -> Text,
        size_bytes -> BigInt,
        row_count -> Nullable<BigInt>,
        connection -> Nullable<Text>,
        tool -> Text,
        idempotency_key -> Nullable<Text>,
        task_id -> Nullable<Text>,
        call_id -> Nullable<Text>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    /// One row per data-access call.
    call_records (id) {
        id -> Text,
        kind -> Text,
        tool -> Text,
        connection -> Nullable<Text>,
        statement -> Text,
        subject -> Text,
        persona -> Nullable<Text>,
        success -> Bool,
        outcome -> Text,
        error_message -> Nullable<Text>,
        duration_ms -> BigInt,
        rows -> Nullable<BigInt>,
        bytes -> Nullable<BigInt>,
        asset_id -> Nullable<Text>,
        task_id -> Nullable<Text>,
        created_at -> Timestamptz,
        upstream_status -> Nullable<Integer>,
    }
}
