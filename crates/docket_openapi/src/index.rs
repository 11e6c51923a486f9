//! From a parsed document to its operations: the `openapi` version is checked,
//! every path item and operation is read with the shape OpenAPI gives it, path
//! item parameters are merged into each operation's, references to parameters,
//! request bodies, responses and path items are followed, ids the document left
//! out are made from the method and path, and two operations with one id are an
//! error. Each error names its location and, where found, its line.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::error::{CatalogError, DuplicateOperationId};
use crate::limits::MAX_OPERATIONS;
use crate::lines::line_of;
use crate::media::choose_media;
use crate::operation::{Operation, Parameter, ParameterLocation, RequestBody, Response};
use crate::pointer::{Pointer, local_tokens, lookup};
use crate::source::Source;

/// The methods a path item may hold, in the order OpenAPI lists them.
pub(crate) const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The longest chain of references followed to reach a parameter, request body,
/// response or path item; a longer one is almost surely a cycle.
const MAX_REFERENCE_HOPS: usize = 32;

/// What indexing a document found.
#[derive(Debug)]
pub(crate) struct Indexed {
    /// The `openapi` field (`3.1.0`).
    pub(crate) openapi: String,
    /// `info.title`.
    pub(crate) title: Option<String>,
    /// `info.version`.
    pub(crate) version: Option<String>,
    /// Every operation, by path, then by method in the order OpenAPI lists them
    /// (`get`, `put`, `post`, `delete`, `options`, `head`, `patch`, `trace`).
    pub(crate) operations: Vec<Operation>,
}

/// Indexes a parsed document.
///
/// # Errors
/// When the document is not OpenAPI 3.0 or 3.1, a part of it does not have the
/// shape OpenAPI gives it, it has too many operations, or two share an id.
pub(crate) fn index(
    name: &str,
    document: &Value,
    source: Source<'_>,
) -> Result<Indexed, CatalogError> {
    Indexer {
        name,
        document,
        source,
    }
    .run()
}

/// An operation read from the document, before ids are made unique.
struct Found {
    operation: Operation,
    /// Where its `operationId` is, when it has one.
    id_at: Option<Pointer>,
}

struct Indexer<'a> {
    name: &'a str,
    document: &'a Value,
    source: Source<'a>,
}

impl<'a> Indexer<'a> {
    fn run(&self) -> Result<Indexed, CatalogError> {
        let root_at = Pointer::root();
        let Value::Object(root) = self.document else {
            return Err(self.invalid(
                &root_at,
                "must be an object with `openapi`, `info` and `paths`",
            ));
        };
        let (openapi, requires_paths) = self.version(root)?;
        let (title, version) = match root.get("info") {
            Some(info) => {
                let info_at = root_at.key("info");
                let info = self.object(info, &info_at)?;
                (
                    self.text(info, "title", &info_at)?,
                    self.text(info, "version", &info_at)?,
                )
            }
            None => (None, None),
        };
        let paths_at = root_at.key("paths");
        let mut found = Vec::new();
        match root.get("paths") {
            Some(paths) => {
                for (path, item) in self.object(paths, &paths_at)? {
                    if path.starts_with("x-") {
                        continue;
                    }
                    self.path_item(path, item, paths_at.key(path), &mut found)?;
                }
            }
            None if requires_paths => {
                return Err(self.invalid(&paths_at, "is missing (OpenAPI 3.0 requires it)"));
            }
            None => {}
        }
        let operations = self.unique_ids(found)?;
        Ok(Indexed {
            openapi,
            title,
            version,
            operations,
        })
    }

    /// The `openapi` field, and whether the version requires `paths` (3.0 does).
    fn version(&self, root: &Map<String, Value>) -> Result<(String, bool), CatalogError> {
        let refuse = |key: &str, found: String| CatalogError::UnsupportedVersion {
            name: self.name.to_owned(),
            found,
            line: line_of(self.source, &Pointer::root().key(key)),
        };
        match root.get("openapi") {
            Some(Value::String(version)) if version.starts_with("3.0.") => {
                Ok((version.clone(), true))
            }
            Some(Value::String(version)) if version.starts_with("3.1.") => {
                Ok((version.clone(), false))
            }
            Some(Value::String(version)) => {
                Err(refuse("openapi", format!("it says `openapi: {version}`")))
            }
            Some(other) => Err(refuse(
                "openapi",
                format!(
                    "its `openapi` is {other}, which is not text (write the version quoted, as \"3.1.0\")"
                ),
            )),
            None if root.contains_key("swagger") => Err(refuse(
                "swagger",
                "it is a Swagger 2.0 document (convert it to OpenAPI 3 first)".to_owned(),
            )),
            None => Err(refuse("openapi", "it has no `openapi` field".to_owned())),
        }
    }

    fn path_item(
        &self,
        path: &str,
        item: &'a Value,
        item_at: Pointer,
        found: &mut Vec<Found>,
    ) -> Result<(), CatalogError> {
        if !path.starts_with('/') {
            return Err(self.invalid(&item_at, "must start with `/`"));
        }
        let variables =
            template_variables(path).map_err(|problem| self.invalid(&item_at, problem))?;
        let (item, item_at) = self.follow(item, item_at)?;
        let item = self.object(item, &item_at)?;
        let shared = self.parameters(item, &item_at)?;
        for method in METHODS {
            let Some(operation) = item.get(method) else {
                continue;
            };
            if found.len() >= MAX_OPERATIONS {
                return Err(CatalogError::TooManyOperations {
                    name: self.name.to_owned(),
                    limit: MAX_OPERATIONS,
                });
            }
            let operation_at = item_at.key(method);
            found.push(self.operation(
                path,
                method,
                operation,
                operation_at,
                &shared,
                &variables,
            )?);
        }
        Ok(())
    }

    fn operation(
        &self,
        path: &str,
        method: &str,
        operation: &'a Value,
        at: Pointer,
        shared: &[Parameter],
        variables: &[String],
    ) -> Result<Found, CatalogError> {
        let map = self.object(operation, &at)?;
        let operation_id = self.text(map, "operationId", &at)?;
        if operation_id.as_deref() == Some("") {
            return Err(self.invalid(&at.key("operationId"), "is empty"));
        }
        let tags = match map.get("tags") {
            None => Vec::new(),
            Some(Value::Array(tags)) => tags
                .iter()
                .enumerate()
                .map(|(index, tag)| match tag {
                    Value::String(tag) => Ok(tag.clone()),
                    _ => Err(self.invalid(&at.key("tags").index(index), "must be text")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(self.invalid(&at.key("tags"), "must be a list of names")),
        };
        let mut parameters = shared.to_vec();
        for parameter in self.parameters(map, &at)? {
            match parameters
                .iter_mut()
                .find(|known| same_parameter(known, &parameter))
            {
                Some(known) => *known = parameter,
                None => parameters.push(parameter),
            }
        }
        for variable in variables {
            let declared = parameters.iter().any(|parameter| {
                parameter.location == ParameterLocation::Path && parameter.name == *variable
            });
            if !declared {
                parameters.push(Parameter {
                    name: variable.clone(),
                    location: ParameterLocation::Path,
                    required: true,
                    description: None,
                    deprecated: false,
                    schema: Some(serde_json::json!({"type": "string"})),
                    style: "simple".to_owned(),
                    explode: false,
                    content_type: None,
                });
            }
        }
        let request_body = match map.get("requestBody") {
            Some(body) => Some(self.request_body(body, at.key("requestBody"))?),
            None => None,
        };
        let responses = match map.get("responses") {
            Some(responses) => self.responses(responses, &at.key("responses"))?,
            None => Vec::new(),
        };
        let id_at = operation_id.as_ref().map(|_| at.key("operationId"));
        Ok(Found {
            operation: Operation {
                operation_id_synthesized: operation_id.is_none(),
                operation_id: operation_id.unwrap_or_default(),
                method: method.to_ascii_uppercase(),
                path: path.to_owned(),
                summary: self.text(map, "summary", &at)?,
                description: self.text(map, "description", &at)?,
                tags,
                deprecated: self.flag(map, "deprecated", &at)?,
                parameters,
                request_body,
                responses,
            },
            id_at,
        })
    }

    /// The `parameters` of a path item or operation.
    fn parameters(
        &self,
        holder: &'a Map<String, Value>,
        at: &Pointer,
    ) -> Result<Vec<Parameter>, CatalogError> {
        let list_at = at.key("parameters");
        let list = match holder.get("parameters") {
            None => return Ok(Vec::new()),
            Some(Value::Array(list)) => list,
            Some(_) => return Err(self.invalid(&list_at, "must be a list of parameters")),
        };
        let mut parameters: Vec<Parameter> = Vec::new();
        for (index, parameter) in list.iter().enumerate() {
            let Some(parameter) = self.parameter(parameter, list_at.index(index))? else {
                continue;
            };
            // A list names a parameter once; should it repeat, the last one stands.
            match parameters
                .iter_mut()
                .find(|known| same_parameter(known, &parameter))
            {
                Some(known) => *known = parameter,
                None => parameters.push(parameter),
            }
        }
        Ok(parameters)
    }

    /// One parameter, or `None` for a header OpenAPI says to ignore (`Accept`,
    /// `Content-Type`, `Authorization`: the request itself sets those).
    fn parameter(&self, value: &'a Value, at: Pointer) -> Result<Option<Parameter>, CatalogError> {
        let (value, at) = self.follow(value, at)?;
        let map = self.object(value, &at)?;
        let Some(name) = self.text(map, "name", &at)? else {
            return Err(self.invalid(&at.key("name"), "is missing; every parameter has a name"));
        };
        let location = match map.get("in") {
            Some(Value::String(location)) => match location.as_str() {
                "path" => ParameterLocation::Path,
                "query" => ParameterLocation::Query,
                "header" => ParameterLocation::Header,
                "cookie" => ParameterLocation::Cookie,
                other => {
                    return Err(self.invalid(
                        &at.key("in"),
                        format!("must be one of path, query, header, cookie (it is `{other}`)"),
                    ));
                }
            },
            Some(_) => {
                return Err(
                    self.invalid(&at.key("in"), "must be one of path, query, header, cookie")
                );
            }
            None => {
                return Err(self.invalid(
                    &at.key("in"),
                    "is missing; it must be one of path, query, header, cookie",
                ));
            }
        };
        if location == ParameterLocation::Header
            && ["accept", "content-type", "authorization"]
                .contains(&name.to_ascii_lowercase().as_str())
        {
            return Ok(None);
        }
        let (schema, content_type) = match (map.get("schema"), map.get("content")) {
            (Some(schema), _) => (Some(self.schema(schema, &at.key("schema"))?), None),
            (None, Some(content)) => {
                let content_at = at.key("content");
                match choose_media(self.object(content, &content_at)?) {
                    Some((media_type, media)) => {
                        let media_at = content_at.key(media_type);
                        let media = self.object(media, &media_at)?;
                        let schema = match media.get("schema") {
                            Some(schema) => Some(self.schema(schema, &media_at.key("schema"))?),
                            None => None,
                        };
                        (schema, Some(media_type.clone()))
                    }
                    None => (None, None),
                }
            }
            (None, None) => (None, None),
        };
        let default_style = match location {
            ParameterLocation::Path | ParameterLocation::Header => "simple",
            ParameterLocation::Query | ParameterLocation::Cookie => "form",
        };
        let style = self
            .text(map, "style", &at)?
            .unwrap_or_else(|| default_style.to_owned());
        let explode = match map.get("explode") {
            Some(Value::Bool(explode)) => *explode,
            Some(_) => return Err(self.invalid(&at.key("explode"), "must be true or false")),
            None => style == "form",
        };
        Ok(Some(Parameter {
            required: location == ParameterLocation::Path || self.flag(map, "required", &at)?,
            description: self.text(map, "description", &at)?,
            deprecated: self.flag(map, "deprecated", &at)?,
            name,
            location,
            schema,
            style,
            explode,
            content_type,
        }))
    }

    fn request_body(&self, value: &'a Value, at: Pointer) -> Result<RequestBody, CatalogError> {
        let (value, at) = self.follow(value, at)?;
        let map = self.object(value, &at)?;
        let content_at = at.key("content");
        let Some(content) = map.get("content") else {
            return Err(self.invalid(
                &content_at,
                "is missing; a request body lists its media types",
            ));
        };
        let Some((media_type, media)) = choose_media(self.object(content, &content_at)?) else {
            return Err(self.invalid(&content_at, "lists no media type"));
        };
        let media_at = content_at.key(media_type);
        let media = self.object(media, &media_at)?;
        let schema = match media.get("schema") {
            Some(schema) => Some(self.schema(schema, &media_at.key("schema"))?),
            None => None,
        };
        Ok(RequestBody {
            content_type: media_type.clone(),
            required: self.flag(map, "required", &at)?,
            description: self.text(map, "description", &at)?,
            schema,
        })
    }

    fn responses(&self, value: &'a Value, at: &Pointer) -> Result<Vec<Response>, CatalogError> {
        let mut responses = Vec::new();
        for (status, response) in self.object(value, at)? {
            if status.starts_with("x-") {
                continue;
            }
            let (response, response_at) = self.follow(response, at.key(status))?;
            let map = self.object(response, &response_at)?;
            let (content_type, schema) = match map.get("content") {
                Some(content) => {
                    let content_at = response_at.key("content");
                    match choose_media(self.object(content, &content_at)?) {
                        Some((media_type, media)) => {
                            let media_at = content_at.key(media_type);
                            let media = self.object(media, &media_at)?;
                            let schema = match media.get("schema") {
                                Some(schema) => Some(self.schema(schema, &media_at.key("schema"))?),
                                None => None,
                            };
                            (Some(media_type.clone()), schema)
                        }
                        None => (None, None),
                    }
                }
                None => (None, None),
            };
            responses.push(Response {
                status: status.clone(),
                description: self.text(map, "description", &response_at)?,
                content_type,
                schema,
            });
        }
        responses.sort_by(|left, right| left.status.cmp(&right.status));
        Ok(responses)
    }

    /// A schema: an object, or `true`/`false` (OpenAPI 3.1).
    fn schema(&self, value: &Value, at: &Pointer) -> Result<Value, CatalogError> {
        match value {
            Value::Object(_) | Value::Bool(_) => Ok(value.clone()),
            _ => Err(self.invalid(at, "must be a schema (an object)")),
        }
    }

    /// Ids made unique: two operations the document gives one id are an error,
    /// and a made-up id steps aside (`get_items_2`) for any other.
    fn unique_ids(&self, found: Vec<Found>) -> Result<Vec<Operation>, CatalogError> {
        let mut given: HashMap<String, usize> = HashMap::new();
        for (position, entry) in found.iter().enumerate() {
            if entry.operation.operation_id_synthesized {
                continue;
            }
            if let Some(first) = given.insert(entry.operation.operation_id.clone(), position) {
                let first = &found[first];
                return Err(CatalogError::DuplicateOperationId(Box::new(
                    DuplicateOperationId {
                        name: self.name.to_owned(),
                        operation_id: entry.operation.operation_id.clone(),
                        first: first.operation.label(),
                        first_line: first.id_at.as_ref().and_then(|at| line_of(self.source, at)),
                        second: entry.operation.label(),
                        second_line: entry.id_at.as_ref().and_then(|at| line_of(self.source, at)),
                    },
                )));
            }
        }
        let mut taken: std::collections::HashSet<String> = given.into_keys().collect();
        let mut operations = Vec::with_capacity(found.len());
        for entry in found {
            let mut operation = entry.operation;
            if operation.operation_id_synthesized {
                let base = synthesized_id(&operation.method, &operation.path);
                let mut candidate = base.clone();
                let mut suffix = 2;
                while taken.contains(&candidate) {
                    candidate = format!("{base}_{suffix}");
                    suffix += 1;
                }
                operation.operation_id = candidate;
            }
            taken.insert(operation.operation_id.clone());
            operations.push(operation);
        }
        Ok(operations)
    }

    /// Follows `$ref`s from a value to what it stands for, and that place's location.
    fn follow(&self, value: &'a Value, at: Pointer) -> Result<(&'a Value, Pointer), CatalogError> {
        let mut current = value;
        let mut at = at;
        for _ in 0..MAX_REFERENCE_HOPS {
            let Some(reference) = current.get("$ref") else {
                return Ok((current, at));
            };
            let reference_at = at.key("$ref");
            let Value::String(reference) = reference else {
                return Err(self.invalid(&reference_at, "must be text"));
            };
            let Some(tokens) = local_tokens(reference) else {
                return Err(self.invalid(
                    &reference_at,
                    format!(
                        "is `{reference}`, which is not in this document; Docket reads one document and follows only local references (`#/components/...`)"
                    ),
                ));
            };
            let Some((target, target_at)) = lookup(self.document, &tokens) else {
                return Err(self.invalid(
                    &reference_at,
                    format!("is `{reference}`, which points at nothing in the document"),
                ));
            };
            current = target;
            at = target_at;
        }
        Err(self.invalid(
            &at,
            format!(
                "is reached through more than {MAX_REFERENCE_HOPS} references in a row (a cycle?)"
            ),
        ))
    }

    fn invalid(&self, at: &Pointer, message: impl Into<String>) -> CatalogError {
        CatalogError::Invalid {
            name: self.name.to_owned(),
            location: at.to_string(),
            line: line_of(self.source, at),
            message: message.into(),
        }
    }

    fn object(
        &self,
        value: &'a Value,
        at: &Pointer,
    ) -> Result<&'a Map<String, Value>, CatalogError> {
        match value {
            Value::Object(map) => Ok(map),
            _ => Err(self.invalid(at, "must be an object")),
        }
    }

    fn text(
        &self,
        map: &Map<String, Value>,
        key: &str,
        at: &Pointer,
    ) -> Result<Option<String>, CatalogError> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(self.invalid(&at.key(key), "must be text")),
        }
    }

    fn flag(
        &self,
        map: &Map<String, Value>,
        key: &str,
        at: &Pointer,
    ) -> Result<bool, CatalogError> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(flag)) => Ok(*flag),
            Some(_) => Err(self.invalid(&at.key(key), "must be true or false")),
        }
    }
}

/// Whether two parameters are the same one: same location and name (header names
/// compared without case).
fn same_parameter(left: &Parameter, right: &Parameter) -> bool {
    left.location == right.location
        && if left.location == ParameterLocation::Header {
            left.name.eq_ignore_ascii_case(&right.name)
        } else {
            left.name == right.name
        }
}

/// The `{variables}` of a path template, in order.
pub(crate) fn template_variables(path: &str) -> Result<Vec<String>, String> {
    let mut variables = Vec::new();
    let mut rest = path;
    while let Some(open) = rest.find(['{', '}']) {
        if rest[open..].starts_with('}') {
            return Err("has a `}` without its `{`".to_owned());
        }
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err("has a `{` without its `}`".to_owned());
        };
        let name = &after[..close];
        if name.is_empty() || name.contains(['{', '/']) {
            return Err(format!(
                "has a template variable `{{{name}}}` that is not a name"
            ));
        }
        variables.push(name.to_owned());
        rest = &after[close + 1..];
    }
    Ok(variables)
}

/// An id for an operation the document gave none: `get_items_by_id` for
/// `GET /items/{id}`, `get_root` for `GET /`.
fn synthesized_id(method: &str, path: &str) -> String {
    let mut id = method.to_ascii_lowercase();
    let mut segments = 0;
    for segment in path.split('/').filter(|segment| !segment.is_empty()) {
        segments += 1;
        let (prefix, text) = match segment
            .strip_prefix('{')
            .and_then(|inner| inner.strip_suffix('}'))
        {
            Some(variable) => ("by_", variable),
            None => ("", segment),
        };
        let mut word = String::new();
        for character in text.chars() {
            if character.is_ascii_alphanumeric() {
                word.push(character.to_ascii_lowercase());
            } else if !word.ends_with('_') {
                word.push('_');
            }
        }
        let word = word.trim_matches('_');
        if !word.is_empty() {
            id.push('_');
            id.push_str(prefix);
            id.push_str(word);
        }
    }
    if segments == 0 {
        id.push_str("_root");
    }
    id
}
