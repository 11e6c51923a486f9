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
const MAX_ITEMS: usize = 64;

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
            self.template.len() <= 64 * 1024,
            "a prompt's template is at most 64 KiB",
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
    let mut found = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        found.push(after[..end].trim());
        rest = &after[end + 2..];
    }
    found
}

/// `template` with each `{{name}}` replaced by `value(name)`; a placeholder
/// `value` has nothing for becomes empty.
pub fn render(template: &str, value: impl Fn(&str) -> Option<String>) -> String {
    let mut rendered = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        rendered.push_str(&rest[..start]);
        rendered.push_str(&value(after[..end].trim()).unwrap_or_default());
        rest = &after[end + 2..];
    }
    rendered.push_str(rest);
    rendered
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
        let rendered = render("Explore {{table}} on {{ connection }}.", |name| {
            (name == "table").then(|| "orders".to_owned())
        });
        assert_eq!(rendered, "Explore orders on .");
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

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any template renders without panicking, and text without braces is kept as it is.
        #[test]
        fn any_template_renders(template in "\\PC{0,80}", plain in "[^{}]{0,40}") {
            let _ = render(&template, |name| Some(name.to_uppercase()));
            proptest::prop_assert_eq!(render(&plain, |_| None), plain);
        }
    }
}
