//! The suite's resources and prompts, registered through the public API as any
//! embedder would: two fixed resources and a template, four prompts (one of them
//! asks for input first), and completions for a prompt's argument.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use docket_protocol::completion::CompletionReference;
use docket_protocol::mrtr::{ElicitRequestParams, InputRequest};
use docket_protocol::prompts::PromptMessage;
use docket_protocol::tools::{BinaryContent, ContentBlock, EmbeddedResource, ResourceContents};
use docket_server::{
    AppBuilder, CompletionRequest, PromptOutcome, PromptRequest, PromptSpec, ResourceError,
    ResourceRead, ResourceSpec, ResourceTemplateSpec, ToolError,
};
use serde_json::json;

use crate::Registered;
use crate::content::RED_PIXEL_PNG;

/// A fixed text resource.
pub(crate) const STATIC_TEXT: &str = "test://static-text";
/// A fixed binary resource (a PNG).
pub(crate) const STATIC_BINARY: &str = "test://static-binary";
/// The template whose resources echo their id.
pub(crate) const TEMPLATE: &str = "test://template/{id}/data";
/// A prompt without arguments.
pub(crate) const SIMPLE_PROMPT: &str = "test_simple_prompt";
/// A prompt with two required arguments.
pub(crate) const PROMPT_WITH_ARGUMENTS: &str = "test_prompt_with_arguments";
/// A prompt that embeds a resource.
pub(crate) const PROMPT_WITH_EMBEDDED_RESOURCE: &str = "test_prompt_with_embedded_resource";
/// A prompt with an image.
pub(crate) const PROMPT_WITH_IMAGE: &str = "test_prompt_with_image";
/// A prompt that asks for context (key `user_context`) before it answers.
pub(crate) const INPUT_REQUIRED_PROMPT: &str = "test_input_required_result_prompt";

/// The text of [`STATIC_TEXT`].
const STATIC_TEXT_CONTENT: &str = "This is the content of the static text resource.";

/// What `arg1` of [`PROMPT_WITH_ARGUMENTS`] is completed from.
const ARG1_SUGGESTIONS: &[&str] = &["alpha", "alpine", "beta", "gamma"];

/// Registers the resources, prompts and completions.
pub(crate) fn register(builder: AppBuilder) -> Registered {
    let builder = builder
        .resource(
            ResourceSpec::new(STATIC_TEXT, "Static text")
                .with_description("A fixed text resource.")
                .with_mime_type("text/plain"),
            |read: ResourceRead| async move {
                Ok(vec![text_contents(&read.uri, "text/plain", STATIC_TEXT_CONTENT)])
            },
        )?
        .resource(
            ResourceSpec::new(STATIC_BINARY, "Static binary")
                .with_description("A fixed 1x1 PNG.")
                .with_mime_type("image/png"),
            |read: ResourceRead| async move {
                Ok(vec![ResourceContents {
                    uri: read.uri,
                    mime_type: Some("image/png".to_owned()),
                    text: None,
                    blob: Some(STANDARD.encode(RED_PIXEL_PNG)),
                    meta: None,
                }])
            },
        )?
        .resource_template(
            ResourceTemplateSpec::new(TEMPLATE, "Template data")
                .with_description("Data for any id; the contents name it.")
                .with_mime_type("application/json"),
            |read: ResourceRead| async move {
                let Some(id) = read.variables.get("id") else {
                    return Err(ResourceError::NotFound);
                };
                let body = json!({"id": id, "data": format!("Data for ID: {id}")}).to_string();
                Ok(vec![text_contents(&read.uri, "application/json", &body)])
            },
        )?
        .prompt(
            PromptSpec::new(SIMPLE_PROMPT, "A prompt without arguments."),
            |_request: PromptRequest| async move {
                Ok(messages(vec![PromptMessage::user(
                    "This is a simple prompt for testing.",
                )]))
            },
        )?
        .prompt(
            PromptSpec::new(PROMPT_WITH_ARGUMENTS, "A prompt that uses both its arguments.")
                .with_argument("arg1", "The first argument.", true)
                .with_argument("arg2", "The second argument.", true),
            |request: PromptRequest| async move {
                let given = |name: &str| request.arguments.get(name).cloned().unwrap_or_default();
                Ok(messages(vec![PromptMessage::user(format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    given("arg1"),
                    given("arg2")
                ))]))
            },
        )?
        .prompt(
            PromptSpec::new(
                PROMPT_WITH_EMBEDDED_RESOURCE,
                "A prompt that embeds the resource `resourceUri` names.",
            )
            .with_argument("resourceUri", "The URI of the resource to embed.", true),
            |request: PromptRequest| async move {
                let uri = request
                    .arguments
                    .get("resourceUri")
                    .cloned()
                    .unwrap_or_default();
                let embedded = ContentBlock::Resource(EmbeddedResource {
                    resource: text_contents(&uri, "text/plain", "Embedded resource content for testing."),
                    annotations: None,
                    meta: None,
                });
                Ok(messages(vec![
                    PromptMessage {
                        role: "user".to_owned(),
                        content: embedded,
                    },
                    PromptMessage::user("Please process the embedded resource above."),
                ]))
            },
        )?
        .prompt(
            PromptSpec::new(PROMPT_WITH_IMAGE, "A prompt with an image."),
            |_request: PromptRequest| async move {
                let image = ContentBlock::Image(BinaryContent {
                    data: STANDARD.encode(RED_PIXEL_PNG),
                    mime_type: "image/png".to_owned(),
                    annotations: None,
                    meta: None,
                });
                Ok(messages(vec![
                    PromptMessage {
                        role: "user".to_owned(),
                        content: image,
                    },
                    PromptMessage::user("Please describe the image above."),
                ]))
            },
        )?
        .prompt(
            PromptSpec::new(
                INPUT_REQUIRED_PROMPT,
                "Asks for context (key user_context) by elicitation, then writes the prompt with it.",
            ),
            input_required_prompt,
        )?;
    Ok(builder.completion(
        CompletionReference::Prompt {
            name: PROMPT_WITH_ARGUMENTS.to_owned(),
        },
        |request: CompletionRequest| async move {
            if request.argument != "arg1" {
                return Vec::new();
            }
            ARG1_SUGGESTIONS
                .iter()
                .filter(|value| value.starts_with(request.value.as_str()))
                .map(|value| (*value).to_owned())
                .collect()
        },
    ))
}

fn text_contents(uri: &str, mime_type: &str, text: &str) -> ResourceContents {
    ResourceContents {
        uri: uri.to_owned(),
        mime_type: Some(mime_type.to_owned()),
        text: Some(text.to_owned()),
        blob: None,
        meta: None,
    }
}

fn messages(messages: Vec<PromptMessage>) -> PromptOutcome {
    PromptOutcome::Messages {
        description: None,
        messages,
    }
}

async fn input_required_prompt(request: PromptRequest) -> Result<PromptOutcome, ToolError> {
    let Some(round) = request.input else {
        if !request.client_capabilities.supports_form_elicitation() {
            return Err(ToolError::MissingCapability {
                message: format!("{INPUT_REQUIRED_PROMPT} needs form elicitation"),
                required: Box::new(docket_protocol::meta::ClientCapabilities::with_elicitation()),
            });
        }
        let question = InputRequest::Elicit(ElicitRequestParams::form(
            "What context should the prompt use?",
            json!({"type": "object", "properties": {"context": {"type": "string"}},
                   "required": ["context"]}),
        ));
        return Ok(PromptOutcome::InputRequired {
            requests: [("user_context".to_owned(), question)]
                .into_iter()
                .collect(),
            state: serde_json::Value::Null,
        });
    };
    let context = round
        .responses
        .get("user_context")
        .and_then(|answer| answer.pointer("/content/context"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("none given");
    Ok(messages(vec![PromptMessage::user(format!(
        "Use this context: {context}"
    ))]))
}
