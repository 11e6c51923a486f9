//! Finding operations by words. Each query word scores by where it matches best:
//! in the operation id or the path (most), the summary, the tags, then the
//! description (least); a whole word counts twice as much as a prefix. More
//! query words matched always ranks higher, a deprecated operation scores half,
//! and ties go by path, then method, so the order never changes between calls.
//! An empty query lists every operation by path and method.

use serde::Serialize;

use crate::index::METHODS;
use crate::limits::{MAX_QUERY_CHARS, MAX_QUERY_WORDS, MAX_SEARCH_LIMIT};
use crate::operation::Operation;
use crate::tokens::words;

/// The points of a whole-word match in each field; a prefix match scores half.
const OPERATION_ID_POINTS: u32 = 100;
const PATH_POINTS: u32 = 100;
const SUMMARY_POINTS: u32 = 60;
const TAG_POINTS: u32 = 40;
const DESCRIPTION_POINTS: u32 = 20;

/// What each matched query word is worth before points: more than any sum of
/// points ([`MAX_QUERY_WORDS`] × the most points a word can score), so that more
/// words matched always ranks first.
const MATCHED_WORD_SCORE: u32 = 10_000;

/// A query word this short only matches whole words, never as a prefix.
const MIN_PREFIX_CHARS: usize = 2;

/// A field word this short is never taken as a prefix of a query word (`id`
/// should not match `identity`).
const MIN_STEM_CHARS: usize = 4;

/// One page of search results.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SearchPage {
    /// How many allowed operations match, over every page.
    pub total: usize,
    /// This page's results, best first.
    pub results: Vec<EndpointSummary>,
}

/// One operation as a search shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EndpointSummary {
    /// The id to ask for its schema or to call it by.
    pub operation_id: String,
    /// The HTTP method, upper-case.
    pub method: String,
    /// The path template.
    pub path: String,
    /// The one-line summary.
    pub summary: Option<String>,
    /// Its tags.
    pub tags: Vec<String>,
    /// Whether it is deprecated.
    pub deprecated: bool,
    /// How well it matched (higher is better; 0 for an empty query).
    pub score: u32,
}

/// The words of one operation's fields, computed once when the catalog is built.
#[derive(Clone, Debug)]
pub(crate) struct OperationWords {
    operation_id: Vec<String>,
    path: Vec<String>,
    summary: Vec<String>,
    tags: Vec<String>,
    description: Vec<String>,
}

impl OperationWords {
    pub(crate) fn of(operation: &Operation) -> Self {
        let distinct = |mut found: Vec<String>| {
            found.sort();
            found.dedup();
            found
        };
        Self {
            operation_id: distinct(words(&operation.operation_id)),
            path: distinct(words(&operation.path)),
            summary: distinct(words(operation.summary.as_deref().unwrap_or_default())),
            tags: distinct(operation.tags.iter().flat_map(|tag| words(tag)).collect()),
            description: distinct(words(operation.description.as_deref().unwrap_or_default())),
        }
    }

    /// The points of the best match of one query word.
    fn points(&self, query_word: &str) -> u32 {
        [
            (&self.operation_id, OPERATION_ID_POINTS),
            (&self.path, PATH_POINTS),
            (&self.summary, SUMMARY_POINTS),
            (&self.tags, TAG_POINTS),
            (&self.description, DESCRIPTION_POINTS),
        ]
        .into_iter()
        .map(|(field, points)| field_points(field, query_word, points))
        .max()
        .unwrap_or(0)
    }
}

fn field_points(field: &[String], query_word: &str, points: u32) -> u32 {
    if field
        .binary_search_by(|word| word.as_str().cmp(query_word))
        .is_ok()
    {
        return points;
    }
    let prefix = field.iter().any(|word| {
        (query_word.chars().count() >= MIN_PREFIX_CHARS && word.starts_with(query_word))
            || (word.chars().count() >= MIN_STEM_CHARS && query_word.starts_with(word.as_str()))
    });
    if prefix { points / 2 } else { 0 }
}

/// Searches `operations` (with their words) for `query`, keeping only those
/// `allowed` lets through, and returns the page at `offset` of at most `limit`
/// (capped at [`MAX_SEARCH_LIMIT`]) results.
pub(crate) fn search(
    operations: &[Operation],
    operation_words: &[OperationWords],
    query: &str,
    allowed: &dyn Fn(&Operation) -> bool,
    offset: usize,
    limit: usize,
) -> SearchPage {
    let query: String = query.chars().take(MAX_QUERY_CHARS).collect();
    let mut query_words = Vec::new();
    for word in words(&query) {
        if !query_words.contains(&word) && query_words.len() < MAX_QUERY_WORDS {
            query_words.push(word);
        }
    }
    let mut hits: Vec<(u32, &Operation)> = operations
        .iter()
        .zip(operation_words)
        .filter(|(operation, _)| allowed(operation))
        .filter_map(|(operation, found)| {
            if query_words.is_empty() {
                return Some((0, operation));
            }
            let mut matched = 0;
            let mut points = 0;
            for query_word in &query_words {
                let word_points = found.points(query_word);
                if word_points > 0 {
                    matched += 1;
                    points += word_points;
                }
            }
            if matched == 0 {
                return None;
            }
            if operation.deprecated {
                points /= 2;
            }
            Some((matched * MATCHED_WORD_SCORE + points, operation))
        })
        .collect();
    hits.sort_by(|(left_score, left), (right_score, right)| {
        right_score
            .cmp(left_score)
            .then_with(|| left.path.cmp(&right.path))
            .then_with(|| method_rank(&left.method).cmp(&method_rank(&right.method)))
            .then_with(|| left.operation_id.cmp(&right.operation_id))
    });
    let total = hits.len();
    let results = hits
        .into_iter()
        .skip(offset)
        .take(limit.min(MAX_SEARCH_LIMIT))
        .map(|(score, operation)| EndpointSummary {
            operation_id: operation.operation_id.clone(),
            method: operation.method.clone(),
            path: operation.path.clone(),
            summary: operation.summary.clone(),
            tags: operation.tags.clone(),
            deprecated: operation.deprecated,
            score,
        })
        .collect();
    SearchPage { total, results }
}

/// Methods in the order OpenAPI lists them (`GET` first).
fn method_rank(method: &str) -> usize {
    METHODS
        .iter()
        .position(|known| known.eq_ignore_ascii_case(method))
        .unwrap_or(METHODS.len())
}
