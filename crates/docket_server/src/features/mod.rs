//! The server features besides tools, as an embedder registers them: resources
//! (fixed URIs and URI templates), prompts and completions, and the methods that
//! serve them in both protocol eras: `resources/list`, `resources/templates/list`,
//! `resources/read`, `prompts/list`, `prompts/get` and `completion/complete`.
//! A feature is advertised, and its methods exist, only when something is
//! registered for it.

mod builtin;
mod completion;
mod prompts;
mod resources;
mod template;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use docket_catalog::{LibraryPrompt, PromptLibrary};
use docket_protocol::JsonObject;
use docket_protocol::completion::{
    CompleteParams, CompleteResult, Completion, CompletionReference,
};
use docket_protocol::mrtr::InputRequiredResult;
use docket_protocol::prompts::{
    GetPromptParams, GetPromptResult, ListPromptsResult, Prompt, PromptArgument, PromptMessage,
};
use docket_protocol::resources::{
    ListParams, ListResourceTemplatesResult, ListResourcesResult, ReadResourceParams,
    ReadResourceResult,
};
use docket_protocol::result::{CacheScope, ResultType};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub(crate) use builtin::BUILT_IN_PROMPTS;
pub use completion::{CompletionFuture, CompletionProvider, CompletionRequest};
pub use prompts::{PromptFuture, PromptHandler, PromptOutcome, PromptRequest, PromptSpec};
pub(crate) use resources::{ListFuture, ResourceLister};
pub use resources::{
    ResourceError, ResourceFuture, ResourceRead, ResourceReader, ResourceSpec, ResourceTemplateSpec,
};

use crate::error::McpError;
use crate::persona::{Persona, Personas};
use crate::registry::{InputRound, RegistryError};
use crate::reply::{Reply, to_value};
use crate::request::RequestContext;
use crate::request_state::{Binding, RequestStateKey};
use template::UriTemplate;

/// How long clients may cache a list of resources, templates or prompts, in ms.
const LIST_TTL_MS: u64 = 60 * 1000;

/// How many suggestions one completion answer carries at most.
const MAX_COMPLETIONS: usize = 100;

/// How long a completion provider may take when none is configured.
const DEFAULT_COMPLETION_TIMEOUT: Duration = Duration::from_secs(3);

/// How many library prompts one page of `prompts/list` holds.
const PROMPTS_PAGE: u32 = 100;

/// The resources methods.
const RESOURCE_METHODS: &[&str] = &[
    "resources/list",
    "resources/templates/list",
    "resources/read",
];
/// The prompts methods.
const PROMPT_METHODS: &[&str] = &["prompts/list", "prompts/get"];
/// The completion method.
pub(crate) const COMPLETION_METHOD: &str = "completion/complete";

/// Everything registered besides tools.
#[derive(Default)]
pub(crate) struct Features {
    resources: Vec<(ResourceSpec, Arc<dyn ResourceReader>)>,
    templates: Vec<(ResourceTemplateSpec, UriTemplate, Arc<dyn ResourceReader>)>,
    prompts: BTreeMap<String, (PromptSpec, Arc<dyn PromptHandler>)>,
    completions: Vec<(CompletionReference, Arc<dyn CompletionProvider>)>,
    /// Lists resources after the registered ones (the caller's assets).
    lister: Option<Arc<dyn ResourceLister>>,
    /// The prompt library: prompts users keep, after the registered ones.
    library: Option<Arc<dyn PromptLibrary>>,
    /// Completes the arguments of library prompts (which register no provider).
    library_completion: Option<Arc<dyn CompletionProvider>>,
    /// How long a provider may take; `None` is [`DEFAULT_COMPLETION_TIMEOUT`].
    completion_timeout: Option<Duration>,
}

/// Who asks, as the features decide what they may see.
pub(crate) struct Caller<'a> {
    /// The request's context (identity, capabilities).
    pub(crate) context: &'a RequestContext,
    /// Whether their persona makes them an administrator.
    pub(crate) is_admin: bool,
    /// Their persona, when they have one.
    pub(crate) persona: Option<Arc<Persona>>,
}

impl<'a> Caller<'a> {
    /// The caller of `context`, with the persona `personas` resolve for them.
    pub(crate) fn new(context: &'a RequestContext, personas: &Personas) -> Self {
        let persona = personas.resolve(&context.identity.roles);
        Self {
            context,
            is_admin: persona.as_ref().is_some_and(|persona| persona.is_admin),
            persona,
        }
    }

    /// Their persona's name, when they have one.
    fn persona_name(&self) -> Option<&str> {
        self.persona.as_ref().map(|persona| persona.name.as_str())
    }
}

impl Features {
    /// Registers a fixed resource.
    pub(crate) fn add_resource(
        &mut self,
        spec: ResourceSpec,
        reader: impl ResourceReader,
    ) -> Result<(), RegistryError> {
        if self
            .resources
            .iter()
            .any(|(known, _)| known.uri == spec.uri)
        {
            return Err(RegistryError::Duplicate(spec.uri));
        }
        self.resources.push((spec, Arc::new(reader)));
        Ok(())
    }

    /// Registers a resource template.
    pub(crate) fn add_template(
        &mut self,
        spec: ResourceTemplateSpec,
        reader: impl ResourceReader,
    ) -> Result<(), RegistryError> {
        let Some(template) = UriTemplate::parse(&spec.uri_template) else {
            return Err(RegistryError::BadName(spec.uri_template));
        };
        if self
            .templates
            .iter()
            .any(|(known, ..)| known.uri_template == spec.uri_template)
        {
            return Err(RegistryError::Duplicate(spec.uri_template));
        }
        self.templates.push((spec, template, Arc::new(reader)));
        Ok(())
    }

    /// Registers a prompt.
    pub(crate) fn add_prompt(
        &mut self,
        spec: PromptSpec,
        handler: impl PromptHandler,
    ) -> Result<(), RegistryError> {
        if self.prompts.contains_key(&spec.name) {
            return Err(RegistryError::Duplicate(spec.name));
        }
        self.prompts
            .insert(spec.name.clone(), (spec, Arc::new(handler)));
        Ok(())
    }

    /// Registers a completion provider for a prompt's arguments or a template's
    /// variables.
    pub(crate) fn add_completion(
        &mut self,
        reference: CompletionReference,
        provider: impl CompletionProvider,
    ) {
        self.completions.push((reference, Arc::new(provider)));
    }

    /// Serves the prompt library (and the built-in prompts that come with it).
    pub(crate) fn set_library(
        &mut self,
        library: Arc<dyn PromptLibrary>,
    ) -> Result<(), RegistryError> {
        for (spec, text) in builtin::prompts() {
            self.add_prompt(spec, move |request: PromptRequest| {
                std::future::ready(builtin::outcome(text(&request)))
            })?;
        }
        self.library = Some(library);
        Ok(())
    }

    /// Sets what completes the arguments of library prompts.
    pub(crate) fn set_library_completion(&mut self, provider: impl CompletionProvider) {
        self.library_completion = Some(Arc::new(provider));
    }

    /// Sets how long a completion provider may take before it is given up on.
    pub(crate) fn set_completion_timeout(&mut self, timeout: Duration) {
        self.completion_timeout = Some(timeout);
    }

    /// The names registered (and built-in) prompts hold.
    pub(crate) fn registered_prompt_names(&self) -> Vec<String> {
        self.prompts.keys().cloned().collect()
    }

    /// Sets what lists resources after the registered ones.
    pub(crate) fn set_lister(&mut self, lister: Arc<dyn ResourceLister>) {
        self.lister = Some(lister);
    }

    /// Whether the prompt list can change while the server runs (the library).
    pub(crate) fn prompts_change(&self) -> bool {
        self.library.is_some()
    }

    /// Whether `resources/list` lists each caller's own resources (their assets).
    pub(crate) fn lists_caller_resources(&self) -> bool {
        self.lister.is_some()
    }

    fn has_resources(&self) -> bool {
        !self.resources.is_empty() || !self.templates.is_empty() || self.lister.is_some()
    }

    fn has_prompts(&self) -> bool {
        !self.prompts.is_empty() || self.library.is_some()
    }

    /// Completions are offered wherever something takes arguments: prompts, and
    /// templates' variables (an argument without a provider gets no suggestions).
    fn has_completions(&self) -> bool {
        self.has_prompts() || !self.templates.is_empty()
    }

    /// Whether `method` is served here.
    pub(crate) fn serves(&self, method: &str) -> bool {
        (self.has_resources() && RESOURCE_METHODS.contains(&method))
            || (self.has_prompts() && PROMPT_METHODS.contains(&method))
            || (self.has_completions() && method == COMPLETION_METHOD)
    }

    /// Whether a view (a `ui://` resource, MCP Apps) is registered.
    fn has_views(&self) -> bool {
        self.resources.iter().any(|(spec, _)| is_view(&spec.uri))
    }

    /// The extensions the features bring, as `capabilities.extensions` entries:
    /// the UI extension when a view is registered.
    pub(crate) fn extensions(&self) -> JsonObject {
        let mut extensions = JsonObject::new();
        if self.has_views() {
            extensions.insert(
                docket_protocol::UI_EXTENSION.to_owned(),
                serde_json::to_value(docket_protocol::ui::UiSettings::html()).unwrap_or_default(),
            );
        }
        extensions
    }

    /// The capabilities to advertise, as `ServerCapabilities` keys.
    pub(crate) fn capabilities(&self) -> JsonObject {
        let mut capabilities = JsonObject::new();
        let empty = || Value::Object(JsonObject::new());
        // `listChanged`: listen streams are told when the list changes.
        let changing = |changes: bool| match changes {
            true => serde_json::json!({ "listChanged": true }),
            false => empty(),
        };
        if self.has_resources() {
            capabilities.insert("resources".into(), changing(self.lister.is_some()));
        }
        if self.has_prompts() {
            capabilities.insert("prompts".into(), changing(self.library.is_some()));
        }
        if self.has_completions() {
            capabilities.insert("completions".into(), empty());
        }
        capabilities
    }
}

/// Whether `uri` names a view (MCP Apps): a resource only hosts that render
/// views use, listed to them alone.
fn is_view(uri: &str) -> bool {
    uri.starts_with("ui://")
}

/// Serves one of the features' methods for the caller of `context` (an
/// administrator or not); `key` seals a prompt's `requestState`.
pub(crate) async fn handle(
    features: &Features,
    key: &RequestStateKey,
    caller: &Caller<'_>,
    method: &str,
    params: Option<Value>,
) -> Result<Reply, McpError> {
    let (context, is_admin) = (caller.context, caller.is_admin);
    if !features.serves(method) {
        return Err(McpError::MethodNotFound(method.to_owned()));
    }
    let params = params.unwrap_or_else(|| Value::Object(JsonObject::new()));
    let answer = match method {
        "resources/list" => {
            let ListParams { cursor } = parse(params, method)?;
            list_resources(features, context, cursor.as_deref()).await
        }
        "resources/templates/list" => {
            let ListParams { cursor } = parse(params, method)?;
            single_page(cursor.as_deref())?;
            to_value(&ListResourceTemplatesResult {
                result_type: ResultType::Complete,
                resource_templates: features
                    .templates
                    .iter()
                    .map(|(spec, ..)| spec.to_wire())
                    .collect(),
                next_cursor: None,
                ttl_ms: LIST_TTL_MS,
                cache_scope: CacheScope::Public,
            })
        }
        "resources/read" => {
            let ReadResourceParams { uri } = parse(params, method)?;
            read(features, context, is_admin, uri).await
        }
        "prompts/list" => {
            let ListParams { cursor } = parse(params, method)?;
            list_prompts(features, caller, cursor.as_deref()).await
        }
        "prompts/get" => {
            let params: GetPromptParams = parse(params, method)?;
            if features.prompts.contains_key(&params.name) {
                get_prompt(features, key, context, params).await
            } else {
                get_library_prompt(features, caller, params).await
            }
        }
        _ => complete(features, caller, parse(params, method)?).await,
    };
    answer.map(Reply::Json)
}

/// Refuses a cursor for a list that is never more than one page.
fn single_page(cursor: Option<&str>) -> Result<(), McpError> {
    match cursor {
        Some(_) => Err(McpError::InvalidParams(
            "invalid cursor: this list has one page".to_owned(),
        )),
        None => Ok(()),
    }
}

fn parse<T: DeserializeOwned>(params: Value, method: &str) -> Result<T, McpError> {
    serde_json::from_value(params)
        .map_err(|err| McpError::InvalidParams(format!("invalid {method} params: {err}")))
}

/// `resources/list`: the registered resources, then the lister's pages (the
/// caller's assets); a cursor continues the lister's pages.
async fn list_resources(
    features: &Features,
    context: &RequestContext,
    cursor: Option<&str>,
) -> Result<Value, McpError> {
    let mut resources = Vec::new();
    if cursor.is_none() {
        // Views are listed only to hosts that render them; others get today's list.
        let ui = context.meta.client_capabilities.declares_ui();
        resources.extend(
            features
                .resources
                .iter()
                .filter(|(spec, _)| ui || !is_view(&spec.uri))
                .map(|(spec, _)| spec.to_wire()),
        );
    }
    let next_cursor = match &features.lister {
        Some(lister) => {
            let (listed, next) = lister
                .list(&context.identity.subject, cursor)
                .await
                .map_err(resource_error)?;
            resources.extend(listed);
            next
        }
        None => {
            single_page(cursor)?;
            None
        }
    };
    to_value(&ListResourcesResult {
        result_type: ResultType::Complete,
        resources,
        next_cursor,
        ttl_ms: LIST_TTL_MS,
        // A list with the caller's own resources in it is theirs alone.
        cache_scope: if features.lister.is_some() {
            CacheScope::Private
        } else {
            CacheScope::Public
        },
    })
}

fn resource_error(error: ResourceError) -> McpError {
    match error {
        ResourceError::Refused(message) => McpError::InvalidParams(message),
        ResourceError::Unavailable(message) => McpError::Unavailable(message),
        ResourceError::NotFound => {
            McpError::InvalidParams("the resources are not available to you".to_owned())
        }
    }
}

/// `resources/read`: a fixed resource, or the first template the URI matches.
async fn read(
    features: &Features,
    context: &RequestContext,
    is_admin: bool,
    uri: String,
) -> Result<Value, McpError> {
    let found = features
        .resources
        .iter()
        .find(|(spec, _)| spec.uri == uri)
        .map(|(_, reader)| (Arc::clone(reader), BTreeMap::new()))
        .or_else(|| {
            features.templates.iter().find_map(|(_, template, reader)| {
                template
                    .matches(&uri)
                    .map(|variables| (Arc::clone(reader), variables))
            })
        });
    let Some((reader, variables)) = found else {
        return Err(McpError::ResourceNotFound(uri));
    };
    let read = ResourceRead {
        uri: uri.clone(),
        variables,
        identity: Arc::clone(&context.identity),
        is_admin,
    };
    match reader.read(read).await {
        // A resource never answers with nothing: no contents reads as not found.
        Ok(contents) if contents.is_empty() => Err(McpError::ResourceNotFound(uri)),
        Ok(contents) => to_value(&ReadResourceResult {
            result_type: ResultType::Complete,
            contents,
            ttl_ms: 0,
            cache_scope: CacheScope::Private,
        }),
        Err(ResourceError::NotFound) => Err(McpError::ResourceNotFound(uri)),
        Err(other) => Err(resource_error(other)),
    }
}

/// `prompts/list`: the registered prompts, then the library's the caller may see,
/// a page at a time, newest first; a cursor continues the library's pages.
async fn list_prompts(
    features: &Features,
    caller: &Caller<'_>,
    cursor: Option<&str>,
) -> Result<Value, McpError> {
    let mut prompts: Vec<Prompt> = Vec::new();
    if cursor.is_none() {
        prompts.extend(features.prompts.values().map(|(spec, _)| spec.to_wire()));
    }
    let next_cursor = match &features.library {
        Some(library) => {
            let before = cursor
                .map(|token| {
                    docket_catalog::PageCursor::decode(token).ok_or_else(|| {
                        McpError::InvalidParams("invalid cursor: not one this server gave".into())
                    })
                })
                .transpose()?;
            let viewer = docket_catalog::PromptViewer {
                subject: &caller.context.identity.subject,
                persona: caller.persona_name(),
                is_admin: caller.is_admin,
            };
            let page = library
                .prompts(&viewer, before.as_ref(), PROMPTS_PAGE)
                .await
                .map_err(library_unavailable)?;
            prompts.extend(page.iter().map(library_wire));
            (page.len() == PROMPTS_PAGE as usize)
                .then(|| page.last().map(|prompt| prompt.cursor().encode()))
                .flatten()
        }
        None => {
            single_page(cursor)?;
            None
        }
    };
    to_value(&ListPromptsResult {
        result_type: ResultType::Complete,
        prompts,
        next_cursor,
        ttl_ms: LIST_TTL_MS,
        // With the library, what is listed depends on who asks.
        cache_scope: if features.library.is_some() {
            CacheScope::Private
        } else {
            CacheScope::Public
        },
    })
}

fn library_unavailable(error: docket_catalog::CatalogError) -> McpError {
    McpError::Unavailable(format!(
        "the prompt library is unavailable; try again: {error}"
    ))
}

/// A library prompt as `prompts/list` shows it.
fn library_wire(prompt: &LibraryPrompt) -> Prompt {
    Prompt {
        name: prompt.name.clone(),
        title: None,
        description: Some(prompt.description.clone()),
        arguments: prompt
            .arguments
            .iter()
            .map(|argument| PromptArgument {
                name: argument.name.clone(),
                description: argument.description.clone(),
                required: Some(argument.required),
            })
            .collect(),
    }
}

/// The library prompt `name` if the caller may see it; an unknown one and one that
/// is not theirs are the same `None`.
async fn visible_library_prompt(
    features: &Features,
    caller: &Caller<'_>,
    name: &str,
) -> Result<Option<LibraryPrompt>, McpError> {
    let Some(library) = &features.library else {
        return Ok(None);
    };
    let found = library.prompt(name).await.map_err(library_unavailable)?;
    Ok(found.filter(|prompt| {
        prompt.visible_to(
            &caller.context.identity.subject,
            caller.persona_name(),
            caller.is_admin,
        )
    }))
}

/// `prompts/get` of a library prompt: its template with the arguments filled in,
/// and a note of the scripts it is meant to run with.
async fn get_library_prompt(
    features: &Features,
    caller: &Caller<'_>,
    params: GetPromptParams,
) -> Result<Value, McpError> {
    let Some(prompt) = visible_library_prompt(features, caller, &params.name).await? else {
        return Err(McpError::InvalidParams(format!(
            "Unknown prompt: {}",
            params.name
        )));
    };
    let given = params.arguments.unwrap_or_default();
    let mut arguments = BTreeMap::new();
    for (name, value) in &given {
        let Some(text) = value.as_str() else {
            return Err(McpError::InvalidParams(format!(
                "argument {name:?} of prompt {:?} must be a string",
                prompt.name
            )));
        };
        if !prompt
            .arguments
            .iter()
            .any(|argument| &argument.name == name)
        {
            return Err(McpError::InvalidParams(format!(
                "prompt {:?} takes no argument {name:?}",
                prompt.name
            )));
        }
        arguments.insert(name.clone(), text.to_owned());
    }
    if let Some(missing) = prompt
        .arguments
        .iter()
        .find(|argument| argument.required && !arguments.contains_key(&argument.name))
    {
        return Err(McpError::InvalidParams(format!(
            "prompt {:?} needs the argument {:?}",
            prompt.name, missing.name
        )));
    }
    let mut text = docket_catalog::prompts::render(
        &prompt.template,
        |name| arguments.get(name).map(String::as_str),
        docket_catalog::prompts::MAX_RENDERED_BYTES,
    )
    .map_err(|too_large| {
        McpError::InvalidParams(format!(
            "prompt {:?}: {too_large}; give shorter arguments",
            prompt.name
        ))
    })?;
    if !prompt.scripts.is_empty() {
        text.push_str(&format!(
            "\n\nScripts meant for this (run them with run_script): {}.",
            prompt.scripts.join(", ")
        ));
    }
    to_value(&GetPromptResult {
        result_type: ResultType::Complete,
        description: Some(prompt.description),
        messages: vec![PromptMessage::user(text)],
    })
}

/// `prompts/get`, with the multi round-trip pattern tools use: a handler may ask
/// first, and its state comes back sealed to this caller, prompt and arguments.
async fn get_prompt(
    features: &Features,
    key: &RequestStateKey,
    context: &RequestContext,
    params: GetPromptParams,
) -> Result<Value, McpError> {
    let unknown = || McpError::InvalidParams(format!("Unknown prompt: {}", params.name));
    let (spec, handler) = features.prompts.get(&params.name).ok_or_else(unknown)?;
    let given = params.arguments.clone().unwrap_or_default();
    let mut arguments = BTreeMap::new();
    for (name, value) in &given {
        let Some(text) = value.as_str() else {
            return Err(McpError::InvalidParams(format!(
                "argument {name:?} of prompt {:?} must be a string",
                spec.name
            )));
        };
        if !spec.arguments.iter().any(|argument| &argument.name == name) {
            return Err(McpError::InvalidParams(format!(
                "prompt {:?} takes no argument {name:?}",
                spec.name
            )));
        }
        arguments.insert(name.clone(), text.to_owned());
    }
    if let Some(missing) = spec
        .arguments
        .iter()
        .find(|argument| argument.required == Some(true) && !arguments.contains_key(&argument.name))
    {
        return Err(McpError::InvalidParams(format!(
            "prompt {:?} needs the argument {:?}",
            spec.name, missing.name
        )));
    }
    let sealed_for = format!("prompt:{}", spec.name);
    let binding = Binding {
        subject: &context.identity.subject,
        tool: &sealed_for,
        arguments: &given,
    };
    let now = crate::request_state::unix_now();
    let input = match (&params.request_state, &params.input_responses) {
        (None, None) => None,
        (Some(sealed), responses) => Some(InputRound {
            responses: responses.clone().unwrap_or_default(),
            state: key
                .open(sealed, binding, now)
                .map_err(|err| McpError::InvalidParams(err.to_string()))?,
        }),
        (None, Some(responses)) => Some(InputRound {
            responses: responses.clone(),
            state: Value::Null,
        }),
    };
    let request = PromptRequest {
        arguments,
        identity: Arc::clone(&context.identity),
        client_capabilities: context.meta.client_capabilities.clone(),
        input,
    };
    match handler.get(request).await.map_err(McpError::from)? {
        PromptOutcome::Messages {
            description,
            messages,
        } => to_value(&GetPromptResult {
            result_type: ResultType::Complete,
            description: description.or_else(|| Some(spec.description.clone())),
            messages,
        }),
        PromptOutcome::InputRequired { requests, state } => to_value(&InputRequiredResult {
            result_type: ResultType::InputRequired,
            input_requests: Some(requests),
            request_state: Some(key.seal(binding, &state, now)),
            meta: None,
        }),
    }
}

/// `completion/complete`: the provider registered for the reference (for a library
/// prompt, the library's), or no suggestions for a known prompt or template
/// without one; an unknown reference is refused. A provider that takes longer than
/// the completion timeout suggests nothing (a completion is a hint, and an
/// upstream that is slow now must not hold the client's input).
async fn complete(
    features: &Features,
    caller: &Caller<'_>,
    params: CompleteParams,
) -> Result<Value, McpError> {
    let context = caller.context;
    let known = match &params.reference {
        CompletionReference::Prompt { name } => {
            features.prompts.contains_key(name)
                || visible_library_prompt(features, caller, name)
                    .await?
                    .is_some()
        }
        CompletionReference::Resource { uri } => features
            .templates
            .iter()
            .any(|(spec, ..)| &spec.uri_template == uri),
    };
    if !known {
        return Err(McpError::InvalidParams(match &params.reference {
            CompletionReference::Prompt { name } => format!("Unknown prompt: {name}"),
            CompletionReference::Resource { uri } => format!("Unknown resource template: {uri}"),
        }));
    }
    let provider = features
        .completions
        .iter()
        .find(|(reference, _)| reference == &params.reference)
        .map(|(_, provider)| Arc::clone(provider))
        .or_else(|| match &params.reference {
            CompletionReference::Prompt { name } if !features.prompts.contains_key(name) => {
                features.library_completion.clone()
            }
            _ => None,
        });
    let mut values = match provider {
        Some(provider) => {
            let context_arguments = params
                .context
                .as_ref()
                .and_then(|context| context.get("arguments"))
                .and_then(Value::as_object)
                .map(|given| {
                    given
                        .iter()
                        .filter_map(|(name, value)| {
                            value.as_str().map(|text| (name.clone(), text.to_owned()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let request = CompletionRequest {
                argument: params.argument.name.clone(),
                value: params.argument.value.clone(),
                context: context_arguments,
                identity: Arc::clone(&context.identity),
                persona: caller.persona.clone(),
            };
            let timeout = features
                .completion_timeout
                .unwrap_or(DEFAULT_COMPLETION_TIMEOUT);
            match tokio::time::timeout(timeout, provider.complete(request)).await {
                Ok(values) => values,
                Err(_) => {
                    tracing::debug!(argument = %params.argument.name, "a completion took too long");
                    Vec::new()
                }
            }
        }
        None => Vec::new(),
    };
    let total = values.len();
    values.truncate(MAX_COMPLETIONS);
    to_value(&CompleteResult {
        result_type: ResultType::Complete,
        completion: Completion {
            has_more: Some(total > values.len()),
            total: u64::try_from(total).ok(),
            values,
        },
    })
}
