//! A document's text and syntax, kept beside its parsed value so that errors can
//! name the line of a location.

/// The syntax a document is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// JSON: the first character that is not white space is `{`.
    Json,
    /// YAML: anything else.
    Yaml,
}

impl Format {
    /// `JSON` or `YAML`, for messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Json => "JSON",
            Self::Yaml => "YAML",
        }
    }
}

/// A document's text, kept to find the line of a location for error messages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Source<'a> {
    /// The text, without a byte order mark.
    pub(crate) text: &'a str,
    /// Its syntax.
    pub(crate) format: Format,
}
