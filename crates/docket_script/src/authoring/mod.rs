//! Tools for writing scripts rather than running them: anchored patches of a
//! source ([`patch`]), unified diffs between versions ([`diff`]) and a
//! source's outline ([`outline`]). Plain text work: nothing here parses
//! Starlark or runs anything, so each works on a source that does not parse
//! yet.

pub mod diff;
pub mod outline;
pub mod patch;
