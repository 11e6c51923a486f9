//! What a check concludes: its line (PASS or FAIL and its counts) and each violation,
//! naming the task it concerns when there is one, so the evidence can follow it.

/// One broken promise.
#[derive(Clone, Debug)]
pub(crate) struct Violation {
    /// The task (or run) concerned, if any.
    pub(crate) task: Option<String>,
    pub(crate) detail: String,
}

/// One check's outcome.
#[derive(Clone, Debug)]
pub(crate) struct Verdict {
    /// Its number in the contract (0 for the replicas' own health).
    pub(crate) number: u8,
    pub(crate) title: &'static str,
    /// What was looked at, counted.
    pub(crate) counts: String,
    pub(crate) violations: Vec<Violation>,
}

impl Verdict {
    pub(crate) fn new(number: u8, title: &'static str) -> Self {
        Self {
            number,
            title,
            counts: String::new(),
            violations: Vec::new(),
        }
    }

    pub(crate) fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// Records a violation about `task`.
    pub(crate) fn fail(&mut self, task: Option<&str>, detail: impl Into<String>) {
        self.violations.push(Violation {
            task: task.map(str::to_owned),
            detail: detail.into(),
        });
    }

    /// The line printed for it.
    pub(crate) fn line(&self) -> String {
        let mark = if self.passed() { "PASS" } else { "FAIL" };
        let violations = match self.violations.len() {
            0 => String::new(),
            1 => "; 1 violation".to_owned(),
            many => format!("; {many} violations"),
        };
        format!(
            "{mark} {}. {}: {}{violations}",
            self.number, self.title, self.counts
        )
    }
}
