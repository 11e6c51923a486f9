//! What is wrong with one argument of a call, in words, before anything is sent.

use std::fmt;

use serde::Serialize;

/// One thing wrong with the arguments of a call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ArgumentProblem {
    /// The argument, as `query.limit`, `path.id`, `headers.X-Trace`, `body.items[0].quantity`.
    pub argument: String,
    /// What is wrong with it, as the end of a sentence that starts with the argument.
    pub problem: String,
}

impl ArgumentProblem {
    pub(crate) fn new(argument: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            argument: argument.into(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for ArgumentProblem {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "`{}` {}", self.argument, self.problem)
    }
}

impl std::error::Error for ArgumentProblem {}
