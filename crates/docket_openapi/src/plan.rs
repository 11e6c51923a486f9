//! A call by operation id, checked before anything is sent: every required
//! parameter is there, no name is unknown, each value and the body pass their
//! schemas, and no header a call must not set is set. The result says exactly
//! what to send; the caller adds the base URL and the connection's credentials.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::limits::{MAX_HEADER_BYTES, MAX_QUERY_PAIRS, MAX_REQUEST_TARGET_BYTES};
use crate::operation::{Operation, Parameter, ParameterLocation};
use crate::problem::ArgumentProblem;
use crate::render::{encode, header_value, is_forbidden_header, is_token, path_value, query_pairs};
use crate::size::compact_len;
use crate::validate::check;

/// The arguments a call takes, each optional.
const ARGUMENTS: [&str; 4] = ["path", "query", "headers", "body"];

/// The most names listed when a name is unknown.
const MAX_NAMES_LISTED: usize = 20;

/// A request ready to send, once the caller puts the connection's base URL in
/// front of `path` and its credentials beside `headers`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlannedCall {
    /// The HTTP method, upper-case.
    pub method: String,
    /// The path with its variables substituted and percent-encoded (`/items/..%2Fx`);
    /// it has exactly as many `/` as the template.
    pub path: String,
    /// The query pairs, in parameter order, not yet encoded.
    pub query: Vec<(String, String)>,
    /// The headers, by the names the document gives them.
    pub headers: Vec<(String, String)>,
    /// The body, when one is sent.
    pub body: Option<Value>,
    /// The body's media type, when one is sent.
    pub content_type: Option<String>,
}

/// Plans a call of `operation` with `args` (`path`, `query`, `headers`, `body`).
///
/// # Errors
/// Every problem found with the arguments, each naming its argument.
pub(crate) fn plan(
    document: &Value,
    openapi_30: bool,
    operation: &Operation,
    args: &Map<String, Value>,
) -> Result<PlannedCall, Vec<ArgumentProblem>> {
    let mut problems = Vec::new();
    for key in args.keys() {
        if !ARGUMENTS.contains(&key.as_str()) {
            problems.push(ArgumentProblem::new(
                key.clone(),
                "is not an argument of a call; a call takes path, query, headers and body",
            ));
        }
    }
    let path_args = group(args, "path", &mut problems);
    let query_args = group(args, "query", &mut problems);
    let header_args = group(args, "headers", &mut problems);
    for name in header_args.keys() {
        if is_forbidden_header(name) {
            problems.push(ArgumentProblem::new(
                format!("headers.{name}"),
                "is set by the connection (its credentials and host) or by the HTTP client, never by a call",
            ));
        } else if !is_token(name) {
            problems.push(ArgumentProblem::new(
                format!("headers.{name}"),
                "is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only)",
            ));
        }
    }
    unknown_names(operation, path_args, ParameterLocation::Path, &mut problems);
    unknown_names(
        operation,
        query_args,
        ParameterLocation::Query,
        &mut problems,
    );
    unknown_names(
        operation,
        header_args,
        ParameterLocation::Header,
        &mut problems,
    );

    let mut given: Vec<(&Parameter, &Value)> = Vec::new();
    for parameter in &operation.parameters {
        let argument = argument_name(parameter);
        let value = match parameter.location {
            ParameterLocation::Path => path_args.get(&parameter.name),
            ParameterLocation::Query => query_args.get(&parameter.name),
            ParameterLocation::Header => header_args
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(&parameter.name))
                .map(|(_, value)| value),
            ParameterLocation::Cookie => {
                if parameter.required {
                    problems.push(ArgumentProblem::new(
                        argument,
                        "is a required cookie, which Docket never sends, so this operation cannot be called",
                    ));
                }
                continue;
            }
        };
        // `null` is taken as not given: agents send it for arguments they leave out.
        match value.filter(|value| !value.is_null()) {
            None if parameter.required => {
                problems.push(ArgumentProblem::new(argument, missing(parameter)));
            }
            None => {}
            Some(value) => {
                let found = parameter
                    .schema
                    .as_ref()
                    .map(|schema| check(document, openapi_30, schema, value, &argument))
                    .unwrap_or_default();
                if found.is_empty() {
                    given.push((parameter, value));
                }
                problems.extend(found);
            }
        }
    }

    let body = args.get("body").filter(|body| !body.is_null());
    match (&operation.request_body, body) {
        (None, Some(_)) => problems.push(ArgumentProblem::new(
            "body",
            format!("is given, but {} takes no request body", operation.label()),
        )),
        (Some(request_body), None) if request_body.required => {
            problems.push(ArgumentProblem::new(
                "body",
                format!("is required ({})", request_body.content_type),
            ));
        }
        (Some(request_body), Some(body)) => {
            if let Some(schema) = &request_body.schema {
                problems.extend(check(document, openapi_30, schema, body, "body"));
            }
        }
        (None, None) | (Some(_), None) => {}
    }
    if !problems.is_empty() {
        return Err(problems);
    }

    // Sized before anything is written: a value whose JSON alone is over the
    // limit is refused without being rendered.
    for (parameter, value) in &given {
        let limit = if parameter.location == ParameterLocation::Header {
            MAX_HEADER_BYTES
        } else {
            MAX_REQUEST_TARGET_BYTES
        };
        if compact_len(value) > limit {
            problems.push(ArgumentProblem::new(
                argument_name(parameter),
                format!(
                    "is longer than the {limit} bytes a request's {} may carry",
                    parameter.location
                ),
            ));
        } else if value
            .as_array()
            .is_some_and(|items| items.len() > MAX_QUERY_PAIRS)
        {
            problems.push(ArgumentProblem::new(
                argument_name(parameter),
                format!("has more than {MAX_QUERY_PAIRS} items"),
            ));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }

    let path = substitute(&operation.path, &given, &mut problems);
    let mut target_bytes = path.len();
    let mut query = Vec::new();
    let mut headers = Vec::new();
    let mut header_bytes = 0;
    for (parameter, value) in &given {
        let argument = argument_name(parameter);
        match parameter.location {
            ParameterLocation::Query => match query_pairs(parameter, value) {
                Ok(pairs) => {
                    for (name, value) in pairs {
                        target_bytes += name.len() + value.len() + 2;
                        query.push((name, value));
                    }
                    if query.len() > MAX_QUERY_PAIRS {
                        problems.push(ArgumentProblem::new(
                            argument.clone(),
                            format!("makes more than {MAX_QUERY_PAIRS} query pairs"),
                        ));
                        break;
                    }
                }
                Err(problem) => problems.push(ArgumentProblem::new(argument.clone(), problem)),
            },
            ParameterLocation::Header => match header_value(parameter, value) {
                Ok(value) => {
                    header_bytes += parameter.name.len() + value.len();
                    headers.push((parameter.name.clone(), value));
                }
                Err(problem) => problems.push(ArgumentProblem::new(argument.clone(), problem)),
            },
            ParameterLocation::Path | ParameterLocation::Cookie => {}
        }
        if target_bytes > MAX_REQUEST_TARGET_BYTES {
            problems.push(ArgumentProblem::new(
                argument,
                format!("makes the path and query longer than {MAX_REQUEST_TARGET_BYTES} bytes"),
            ));
            break;
        }
        if header_bytes > MAX_HEADER_BYTES {
            problems.push(ArgumentProblem::new(
                argument,
                format!("makes the headers longer than {MAX_HEADER_BYTES} bytes"),
            ));
            break;
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let content_type = body.and_then(|_| {
        operation
            .request_body
            .as_ref()
            .map(|request_body| request_body.content_type.clone())
    });
    Ok(PlannedCall {
        method: operation.method.clone(),
        path,
        query,
        headers,
        body: body.cloned(),
        content_type,
    })
}

/// `path.id`, `query.limit`, `headers.X-Trace`, `cookie.session`.
fn argument_name(parameter: &Parameter) -> String {
    let group = match parameter.location {
        ParameterLocation::Path => "path",
        ParameterLocation::Query => "query",
        ParameterLocation::Header => "headers",
        ParameterLocation::Cookie => "cookie",
    };
    format!("{group}.{}", parameter.name)
}

/// The object `args[key]`, or an empty one (with a problem when it is not an object).
fn group<'a>(
    args: &'a Map<String, Value>,
    key: &str,
    problems: &mut Vec<ArgumentProblem>,
) -> &'a Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    let empty = EMPTY.get_or_init(Map::new);
    match args.get(key) {
        Some(Value::Object(map)) => map,
        None | Some(Value::Null) => empty,
        Some(_) => {
            problems.push(ArgumentProblem::new(
                key,
                "must be an object of parameter values by name",
            ));
            empty
        }
    }
}

/// A problem for each name in `given` that is not a parameter of `location`.
fn unknown_names(
    operation: &Operation,
    given: &Map<String, Value>,
    location: ParameterLocation,
    problems: &mut Vec<ArgumentProblem>,
) {
    let declared: Vec<&str> = operation
        .parameters
        .iter()
        .filter(|parameter| parameter.location == location)
        .map(|parameter| parameter.name.as_str())
        .collect();
    let group = if location == ParameterLocation::Header {
        "headers"
    } else {
        location.as_str()
    };
    for name in given.keys() {
        let known = if location == ParameterLocation::Header {
            // Forbidden and malformed names are already reported.
            is_forbidden_header(name)
                || !is_token(name)
                || declared
                    .iter()
                    .any(|known| known.eq_ignore_ascii_case(name))
        } else {
            declared.contains(&name.as_str())
        };
        if known {
            continue;
        }
        let listed = if declared.is_empty() {
            format!("it takes no {location} parameters")
        } else {
            let mut names: Vec<&str> = declared.iter().take(MAX_NAMES_LISTED).copied().collect();
            if declared.len() > MAX_NAMES_LISTED {
                names.push("…");
            }
            format!("its {location} parameters are {}", names.join(", "))
        };
        problems.push(ArgumentProblem::new(
            format!("{group}.{name}"),
            format!("is not a parameter of {}; {listed}", operation.label()),
        ));
    }
}

/// `is required (integer: how many items to return)`.
fn missing(parameter: &Parameter) -> String {
    let kind = parameter
        .schema
        .as_ref()
        .and_then(|schema| schema.get("type"))
        .and_then(Value::as_str);
    let description = parameter.description.as_deref().map(|text| {
        let short: String = text.chars().take(120).collect();
        if short.len() < text.len() {
            format!("{short}…")
        } else {
            short
        }
    });
    match (kind, description) {
        (Some(kind), Some(description)) => format!("is required ({kind}: {description})"),
        (Some(kind), None) => format!("is required ({kind})"),
        (None, Some(description)) => format!("is required ({description})"),
        (None, None) => "is required".to_owned(),
    }
}

/// The path template with its variables replaced by their encoded values. A
/// segment that would become empty, `.` or `..` is refused: either would change
/// which resource the path names.
fn substitute(
    template: &str,
    given: &[(&Parameter, &Value)],
    problems: &mut Vec<ArgumentProblem>,
) -> String {
    let mut path = String::with_capacity(template.len());
    for (position, segment) in template.split('/').enumerate() {
        if position > 0 {
            path.push('/');
        }
        let mut rendered = String::new();
        let mut variables = Vec::new();
        let mut rest = segment;
        while let Some(open) = rest.find('{') {
            rendered.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let Some(close) = after.find('}') else {
                rendered.push_str(&rest[open..]);
                rest = "";
                break;
            };
            let name = &after[..close];
            variables.push(name);
            let value = given.iter().find(|(parameter, _)| {
                parameter.location == ParameterLocation::Path && parameter.name == name
            });
            match value {
                Some((parameter, value)) => match path_value(parameter, value) {
                    Ok(text) => rendered.push_str(&text),
                    Err(problem) => {
                        problems.push(ArgumentProblem::new(argument_name(parameter), problem))
                    }
                },
                // Every template variable is a required parameter, so a missing one
                // was reported already; this keeps the segment recognisable.
                None => rendered.push_str(&encode(name)),
            }
            rest = &after[close + 1..];
        }
        rendered.push_str(rest);
        if !variables.is_empty() && matches!(rendered.as_str(), "" | "." | "..") {
            problems.push(ArgumentProblem::new(
                format!("path.{}", variables.join("+")),
                format!("would make the path segment `{rendered}`, which changes the path; give a value that names a resource"),
            ));
        }
        path.push_str(&rendered);
    }
    path
}
