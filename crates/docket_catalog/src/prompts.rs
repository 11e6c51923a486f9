//! The prompt library: prompts a team keeps for its data work, each with an owner,
//! a template whose `{{argument}}` placeholders its declared arguments fill, the
//! scripts it is meant to run with, and who it is shared with. Names are one
//! namespace for the whole server (a prompt is found by name), and the
//! [`PromptLibrary`] trait is what the backends implement. Who may see or change a
//! prompt is the server's decision; a store answers for any name it is given.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::error::{CatalogError, require};
use crate::page::PageCursor;

/// Shared with everyone, as an entry of [`LibraryPrompt::shared_with`].
pub const EVERYONE: &str = "*";

/// How many arguments, scripts and sharing entries one prompt may have.
pub const MAX_ITEMS: usize = 64;

/// The longest description of a prompt, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 2048;

/// The longest description of one argument, in bytes.
pub const MAX_ARGUMENT_DESCRIPTION_BYTES: usize = 1024;

/// The longest template, in bytes.
pub const MAX_TEMPLATE_BYTES: usize = 64 * 1024;

/// The longest entry of [`LibraryPrompt::scripts`] and of
/// [`LibraryPrompt::shared_with`] (a script's or a persona's name), in bytes.
pub const MAX_REFERENCE_BYTES: usize = 128;

/// How many prompts one page of a listing holds at most.
pub const MAX_PAGE: u32 = 200;

/// One declared argument of a library prompt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptArgumentSpec {
    /// Its name, as `{{name}}` in the template.
    pub name: String,
    /// What to give.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether it must be given.
    #[serde(default)]
    pub required: bool,
}

/// A prompt as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibraryPrompt {
    /// Its name: letters, digits, `_`, `-` and `.`, 1–64 characters.
    pub name: String,
    /// Who owns it.
    pub owner: String,
    /// What it is for.
    pub description: String,
    /// The text, with `{{argument}}` placeholders.
    pub template: String,
    /// Its arguments.
    pub arguments: Vec<PromptArgumentSpec>,
    /// Names of the scripts it is meant to run with.
    pub scripts: Vec<String>,
    /// Persona names it is shared with; [`EVERYONE`] for everyone.
    pub shared_with: Vec<String>,
    /// When it was created (database clock).
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
}

impl LibraryPrompt {
    /// Whether `subject`, of persona `persona` (an administrator or not), may see and
    /// use the prompt: its owner, administrators, and those it is shared with.
    pub fn visible_to(&self, subject: &str, persona: Option<&str>, is_admin: bool) -> bool {
        is_admin
            || self.owner == subject
            || self.shared_with.iter().any(|shared| {
                shared == EVERYONE || persona.is_some_and(|persona| shared == persona)
            })
    }

    /// Where a page that ends with this prompt ends (its creation time and name).
    pub fn cursor(&self) -> PageCursor {
        PageCursor {
            created_at: self.created_at,
            id: self.name.clone(),
        }
    }
}

/// Who reads a listing of the library: it holds only the prompts they may see,
/// by the rule of [`LibraryPrompt::visible_to`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromptViewer<'a> {
    /// Their subject: they see the prompts they own.
    pub subject: &'a str,
    /// Their persona's name: they see the prompts shared with it.
    pub persona: Option<&'a str>,
    /// Whether they are an administrator, who sees every prompt.
    pub is_admin: bool,
}

impl PromptViewer<'_> {
    /// Whether the viewer may see `prompt`.
    pub fn sees(&self, prompt: &LibraryPrompt) -> bool {
        prompt.visible_to(self.subject, self.persona, self.is_admin)
    }
}

/// A prompt to store: everything but the times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewPrompt {
    /// Its name.
    pub name: String,
    /// Who owns it.
    pub owner: String,
    /// What it is for.
    pub description: String,
    /// The text, with `{{argument}}` placeholders.
    pub template: String,
    /// Its arguments.
    pub arguments: Vec<PromptArgumentSpec>,
    /// Scripts it is meant to run with.
    pub scripts: Vec<String>,
    /// Persona names it is shared with; [`EVERYONE`] for everyone.
    pub shared_with: Vec<String>,
}

impl NewPrompt {
    /// Checks what every backend enforces: a well-formed name, a description and
    /// a template, argument names that are unique, and placeholders that name
    /// declared arguments.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] saying what is wrong.
    pub fn validate(&self) -> Result<(), CatalogError> {
        let well_formed = |name: &str| {
            (1..=64).contains(&name.len())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        };
        require(
            well_formed(&self.name),
            "a prompt name is 1 to 64 letters, digits, '_', '-' or '.'",
        )?;
        require(!self.owner.is_empty(), "a prompt needs an owner")?;
        require(
            !self.description.trim().is_empty(),
            "a prompt needs a description",
        )?;
        require(
            !self.template.trim().is_empty(),
            "a prompt needs a template",
        )?;
        require(
            self.description.len() <= MAX_DESCRIPTION_BYTES,
            "a prompt's description is at most 2048 bytes",
        )?;
        require(
            self.template.len() <= MAX_TEMPLATE_BYTES,
            "a prompt's template is at most 64 KiB",
        )?;
        require(
            self.scripts
                .iter()
                .chain(&self.shared_with)
                .all(|entry| !entry.is_empty() && entry.len() <= MAX_REFERENCE_BYTES),
            "a script or persona a prompt names is 1 to 128 bytes",
        )?;
        require(
            self.arguments.len() <= MAX_ITEMS
                && self.scripts.len() <= MAX_ITEMS
                && self.shared_with.len() <= MAX_ITEMS,
            "a prompt has at most 64 arguments, 64 scripts and 64 entries it is shared with",
        )?;
        for (index, argument) in self.arguments.iter().enumerate() {
            require(
                well_formed(&argument.name),
                "an argument name is 1 to 64 letters, digits, '_', '-' or '.'",
            )?;
            require(
                argument
                    .description
                    .as_ref()
                    .is_none_or(|description| description.len() <= MAX_ARGUMENT_DESCRIPTION_BYTES),
                "an argument's description is at most 1024 bytes",
            )?;
            require(
                !self.arguments[..index]
                    .iter()
                    .any(|earlier| earlier.name == argument.name),
                "argument names must be unique",
            )?;
        }
        for placeholder in placeholders(&self.template) {
            if !self
                .arguments
                .iter()
                .any(|argument| argument.name == placeholder)
            {
                return Err(CatalogError::Invalid(format!(
                    "the template uses {{{{{placeholder}}}}}, which is no declared argument"
                )));
            }
        }
        Ok(())
    }
}

/// The names of the `{{name}}` placeholders in `template`, in order.
pub fn placeholders(template: &str) -> Vec<&str> {
    pieces(template)
        .filter_map(|(_, placeholder)| placeholder)
        .collect()
}

/// The most bytes a rendered prompt may have (`prompts/get`'s answer): a template
/// under its 64 KiB cap may repeat one placeholder thousands of times, so what an
/// argument costs is multiplied, and the size is summed before anything is built.
pub const MAX_RENDERED_BYTES: usize = 1 << 20;

/// A rendering refused by [`render`]: it would be `size` bytes (`None`: more than
/// a `usize` holds), over `limit`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the prompt would render to {} bytes, over the limit of {limit}",
    size.map_or_else(|| "more than 2^64".to_owned(), |size| size.to_string())
)]
pub struct RenderTooLarge {
    /// The size it would have had.
    pub size: Option<usize>,
    /// The limit it crossed.
    pub limit: usize,
}

/// The pieces of `template`: each literal run, then the placeholder that follows
/// it (`None` after the last literal).
fn pieces(template: &str) -> impl Iterator<Item = (&str, Option<&str>)> {
    let mut rest = Some(template);
    std::iter::from_fn(move || {
        let text = rest?;
        if let Some(start) = text.find("{{") {
            let after = &text[start + 2..];
            if let Some(end) = after.find("}}") {
                rest = Some(&after[end + 2..]);
                return Some((&text[..start], Some(after[..end].trim())));
            }
        }
        rest = None;
        Some((text, None))
    })
}

/// `template` with each `{{name}}` replaced by `value(name)`; a placeholder
/// `value` has nothing for becomes empty. The result's size is summed first and
/// a result over `max_bytes` is refused before any of it is built.
///
/// # Errors
/// [`RenderTooLarge`] naming the size and the limit.
pub fn render<'a>(
    template: &str,
    value: impl Fn(&str) -> Option<&'a str>,
    max_bytes: usize,
) -> Result<String, RenderTooLarge> {
    let size = pieces(template).try_fold(0usize, |size, (literal, placeholder)| {
        let filled = placeholder.and_then(&value).map_or(0, str::len);
        size.checked_add(literal.len())?.checked_add(filled)
    });
    match size {
        Some(size) if size <= max_bytes => {}
        size => {
            return Err(RenderTooLarge {
                size,
                limit: max_bytes,
            });
        }
    }
    let mut rendered = String::with_capacity(size.unwrap_or_default());
    for (literal, placeholder) in pieces(template) {
        rendered.push_str(literal);
        rendered.push_str(placeholder.and_then(&value).unwrap_or_default());
    }
    Ok(rendered)
}

/// Where the prompt library is kept.
#[async_trait]
pub trait PromptLibrary: Send + Sync {
    /// Stores a new prompt, unless its owner already owns `owner_limit` prompts
    /// (checked and inserted atomically: concurrent creates never pass the limit).
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] for what [`NewPrompt::validate`] refuses,
    /// [`CatalogError::LimitReached`] with `owner_limit` when the owner has that
    /// many, [`CatalogError::Duplicate`] for a name taken, [`CatalogError::Unavailable`].
    async fn create_prompt(
        &self,
        prompt: NewPrompt,
        owner_limit: u32,
    ) -> Result<LibraryPrompt, CatalogError>;

    /// Replaces everything but the name, owner and creation time of the prompt
    /// `prompt.name`; `None` when there is none.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] or [`CatalogError::Unavailable`].
    async fn update_prompt(&self, prompt: NewPrompt)
    -> Result<Option<LibraryPrompt>, CatalogError>;

    /// The prompt `name`.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn prompt(&self, name: &str) -> Result<Option<LibraryPrompt>, CatalogError>;

    /// A page of the prompts `viewer` may see, newest first (by creation time, then
    /// name), strictly before `before` in that order, at most `limit` (and at most
    /// [`MAX_PAGE`]). A page shorter than `limit` is the last.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn prompts(
        &self,
        viewer: &PromptViewer<'_>,
        before: Option<&PageCursor>,
        limit: u32,
    ) -> Result<Vec<LibraryPrompt>, CatalogError>;

    /// Deletes the prompt `name`; whether there was one.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`].
    async fn delete_prompt(&self, name: &str) -> Result<bool, CatalogError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_and_checked() {
        assert_eq!(placeholders("a {{x}} b {{ y }} {{x"), vec!["x", "y"]);
        let rendered = render(
            "Explore {{table}} on {{ connection }}.",
            |name| (name == "table").then_some("orders"),
            MAX_RENDERED_BYTES,
        );
        assert_eq!(rendered.as_deref(), Ok("Explore orders on ."));
        let prompt = NewPrompt {
            name: "explore".into(),
            owner: "apikey:alice".into(),
            description: "d".into(),
            template: "{{table}} {{missing}}".into(),
            arguments: vec![PromptArgumentSpec {
                name: "table".into(),
                description: None,
                required: true,
            }],
            scripts: Vec::new(),
            shared_with: Vec::new(),
        };
        assert!(
            matches!(prompt.validate(), Err(CatalogError::Invalid(message)) if message.contains("missing"))
        );
    }

    #[test]
    fn a_rendering_is_sized_before_it_is_built() {
        // 13 000 placeholders in a template under its cap, each filled with 16 KiB,
        // would be 213 MB.
        let template = "{{a}}".repeat(13_000);
        let argument = "v".repeat(16 * 1024);
        let refused = render(&template, |_| Some(argument.as_str()), MAX_RENDERED_BYTES)
            .expect_err("too large");
        assert_eq!(
            refused,
            RenderTooLarge {
                size: Some(13_000 * 16 * 1024),
                limit: MAX_RENDERED_BYTES
            }
        );
        assert!(refused.to_string().contains("212992000 bytes"), "{refused}");
        // Exactly at the limit renders; one byte over does not.
        let fits = render("ab{{a}}", |_| Some("cd"), 4).expect("fits");
        assert_eq!(fits, "abcd");
        assert!(render("ab{{a}}", |_| Some("cde"), 4).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any template renders without panicking, and text without braces is kept as it is.
        #[test]
        fn any_template_renders(template in "\\PC{0,80}", plain in "[^{}]{0,40}") {
            let rendered = render(&template, |_| Some("xy"), usize::MAX)
                .expect("no limit");
            // The size summed first is the size built.
            proptest::prop_assert!(render(&template, |_| Some("xy"), rendered.len()).is_ok());
            if let Some(smaller) = rendered.len().checked_sub(1) {
                proptest::prop_assert!(render(&template, |_| Some("xy"), smaller).is_err());
            }
            proptest::prop_assert_eq!(render(&plain, |_| None, plain.len()), Ok(plain.clone()));
        }
    }
}
