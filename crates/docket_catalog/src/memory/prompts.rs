//! [`MemoryPrompts`]: the prompt library in a mutex-guarded map.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{lock, now};
use crate::prompts::{LibraryPrompt, MAX_PAGE, NewPrompt, PromptLibrary, PromptViewer};
use crate::{CatalogError, PageCursor};

/// A [`PromptLibrary`] in memory.
#[derive(Debug, Default)]
pub struct MemoryPrompts {
    prompts: Mutex<BTreeMap<String, LibraryPrompt>>,
}

impl MemoryPrompts {
    /// No prompts.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl PromptLibrary for MemoryPrompts {
    async fn create_prompt(
        &self,
        prompt: NewPrompt,
        owner_limit: u32,
    ) -> Result<LibraryPrompt, CatalogError> {
        prompt.validate()?;
        let mut prompts = lock(&self.prompts);
        let owned = prompts
            .values()
            .filter(|stored| stored.owner == prompt.owner)
            .count();
        if owned >= usize::try_from(owner_limit).unwrap_or(usize::MAX) {
            return Err(CatalogError::LimitReached(owner_limit));
        }
        if prompts.contains_key(&prompt.name) {
            return Err(CatalogError::Duplicate);
        }
        let now = now();
        let stored = LibraryPrompt {
            name: prompt.name,
            owner: prompt.owner,
            description: prompt.description,
            template: prompt.template,
            arguments: prompt.arguments,
            scripts: prompt.scripts,
            shared_with: prompt.shared_with,
            created_at: now,
            updated_at: now,
        };
        prompts.insert(stored.name.clone(), stored.clone());
        Ok(stored)
    }

    async fn update_prompt(
        &self,
        prompt: NewPrompt,
    ) -> Result<Option<LibraryPrompt>, CatalogError> {
        prompt.validate()?;
        let mut prompts = lock(&self.prompts);
        let Some(stored) = prompts.get_mut(&prompt.name) else {
            return Ok(None);
        };
        stored.description = prompt.description;
        stored.template = prompt.template;
        stored.arguments = prompt.arguments;
        stored.scripts = prompt.scripts;
        stored.shared_with = prompt.shared_with;
        stored.updated_at = now();
        Ok(Some(stored.clone()))
    }

    async fn prompt(&self, name: &str) -> Result<Option<LibraryPrompt>, CatalogError> {
        Ok(lock(&self.prompts).get(name).cloned())
    }

    async fn prompts(
        &self,
        viewer: &PromptViewer<'_>,
        before: Option<&PageCursor>,
        limit: u32,
    ) -> Result<Vec<LibraryPrompt>, CatalogError> {
        let position = |prompt: &LibraryPrompt| (prompt.created_at, prompt.name.clone());
        let mut visible: Vec<LibraryPrompt> = lock(&self.prompts)
            .values()
            .filter(|prompt| viewer.sees(prompt))
            .filter(|prompt| {
                before
                    .is_none_or(|cursor| position(prompt) < (cursor.created_at, cursor.id.clone()))
            })
            .cloned()
            .collect();
        visible.sort_by_key(|prompt| std::cmp::Reverse(position(prompt)));
        visible.truncate(usize::try_from(limit.min(MAX_PAGE)).unwrap_or(usize::MAX));
        Ok(visible)
    }

    async fn delete_prompt(&self, name: &str) -> Result<bool, CatalogError> {
        Ok(lock(&self.prompts).remove(name).is_some())
    }
}
