//! `manage_script help`: every command with what it takes, and the patch
//! grammar; and the list an unknown command is answered with.

use serde_json::{Value, json};

/// Each command and what it does, in the order `help` lists them.
pub(super) const COMMANDS: &[(&str, &str)] = &[
    (
        "create",
        "Saves a new script: name, source, description?, params?.",
    ),
    (
        "update",
        "Saves a new version: name, and any of source, description, params, enabled, status.",
    ),
    ("get", "Reads a script with its newest source: name."),
    ("list", "Lists your scripts (administrators: everyone's)."),
    (
        "delete",
        "Deletes a script with its versions, runs and schedule: name.",
    ),
    (
        "validate",
        "Checks source without saving it and says what it checked: source, params?.",
    ),
    (
        "run_draft",
        "Runs source (or a saved script) as yourself under draft limits; nothing is saved: source or name, args?.",
    ),
    ("help", "This list."),
    (
        "patch",
        "Edits the newest source in place: name, edits, base_version?, dry_run?. Answers each edit's index, op, matches and line and a unified diff, never the whole source.",
    ),
    (
        "diff",
        "A unified diff between two versions: name, from_version? (default: the one before to_version), to_version? (default: the newest).",
    ),
    (
        "outline",
        "The top-level functions and statements with their lines: name, to_version?.",
    ),
    (
        "stats",
        "Size, lines, functions, platform calls and versions of a script: name.",
    ),
    (
        "runs",
        "A script's runs, newest first: name, run_status? (queued, running, succeeded, failed, cancelled), limit? (default 20, at most 50).",
    ),
    ("get_run", "Reads one run: run_id."),
    (
        "schedule_set",
        "Sets the script's one schedule: name, cron (five fields or @hourly, @daily, @weekly, @monthly, @yearly), timezone? (IANA, default UTC), args? (\"${fire_date}\" in a string becomes the fire's date). Answers the next fire times.",
    ),
    (
        "schedule_list",
        "Your schedules (administrators: everyone's), or one script's with its recent fires: name?.",
    ),
    (
        "schedule_enable",
        "Enables a script's schedule; it fires from the next fire time on: name.",
    ),
    ("schedule_disable", "Disables a script's schedule: name."),
];

/// The command names, for refusals.
pub(super) fn known_commands() -> String {
    COMMANDS
        .iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `help` answer.
pub(super) fn help() -> Value {
    let commands: Vec<Value> = COMMANDS
        .iter()
        .map(|(name, what)| json!({"command": name, "does": what}))
        .collect();
    json!({
        "commands": commands,
        "schedules": {
            "fires": "Each fire time becomes one run with trigger schedule, however many replicas run the scheduler; a run acts with its version author's roles.",
            "overlap": "A fire that finds the schedule's previous run still queued or running is recorded as skipped_overlap and runs nothing.",
            "downtime": "After downtime only the latest missed fire runs; the number missed is added to missed_fires.",
            "disabled": "A disabled or deprecated script's schedule does not fire; enabling resumes at the next fire time.",
            "daylight_saving": "In a skipped hour, a fixed-time schedule fires at the first minute after the gap and a wildcard or step schedule has no fires in it; in a repeated hour, a fixed-time schedule fires once (the first pass) and a wildcard or step schedule fires in both.",
        },
        "patch": {
            "edit": "{op?, find | pattern, replace | text, section?, occurrence?}",
            "ops": {
                "replace": "Replaces the match with replace (the default op; an empty replace deletes it).",
                "insert_before": "Inserts text just before the match.",
                "insert_after": "Inserts text just after the match.",
                "append": "Adds text at the end of the script, or of the section. No anchor.",
                "prepend": "Adds text at the start of the script, or of the section. No anchor.",
            },
            "find": "Exact text to anchor on.",
            "pattern": "A regular expression (RE2 syntax) to anchor on.",
            "section": "The name of a top-level function: the anchor is looked for only inside it (see outline).",
            "occurrence": "An anchor must match exactly once; otherwise first, last, all or a number from 1 chooses.",
            "order": "Edits apply in order, each to the text the one before left; if any cannot apply, nothing is saved.",
            "lines": "Line numbers in answers are for reading only; anchors are always text.",
            "base_version": "The version your edits were written against; if the script moved on, the patch is refused with PATCH_STALE_BASE.",
            "codes": ["PATCH_NO_MATCH", "PATCH_AMBIGUOUS", "PATCH_STALE_BASE", "PATCH_SECTION_NOT_FOUND", "PATCH_BAD_PATTERN", "PATCH_BAD_EDIT", "PATCH_TOO_LARGE"],
        },
    })
}
