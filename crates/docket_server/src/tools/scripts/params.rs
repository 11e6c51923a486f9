//! A script's parameter contract: its shape, and binding a run's arguments to it.

use serde_json::{Map, Value};

/// Binds `args` to the parameter contract: every required parameter given,
/// defaults filled in, no unknown argument, each of its declared type.
pub(super) fn bind_params(
    contract: &Value,
    mut args: Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let declared = contract.as_array().cloned().unwrap_or_default();
    let mut bound = Map::new();
    for param in &declared {
        let Some(name) = param.get("name").and_then(Value::as_str) else {
            continue;
        };
        let value = match args.remove(name) {
            Some(value) => value,
            None => match param.get("default") {
                Some(default) => default.clone(),
                None if param
                    .get("required")
                    .and_then(Value::as_bool)
                    .unwrap_or(false) =>
                {
                    return Err(format!("the parameter {name:?} is required"));
                }
                None => continue,
            },
        };
        let kind = param
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string");
        let fits = match kind {
            "int" => value.is_i64() || value.is_u64(),
            "float" => value.is_number(),
            "bool" => value.is_boolean(),
            "enum" => param
                .get("values")
                .and_then(Value::as_array)
                .is_none_or(|values| values.contains(&value)),
            _ => value.is_string(),
        };
        if !fits && !value.is_null() {
            return Err(format!("the parameter {name:?} must be of type {kind}"));
        }
        bound.insert(name.to_owned(), value);
    }
    if let Some(unknown) = args.keys().next() {
        return Err(format!("the script has no parameter {unknown:?}"));
    }
    Ok(bound)
}

/// Checks a parameter contract's shape.
pub(super) fn check_contract(params: &Value) -> Result<(), String> {
    let Some(params) = params.as_array() else {
        return Err("params must be a list of {name, type, required, default, description}".into());
    };
    for param in params {
        let name = param
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if name.is_empty() {
            return Err("every parameter needs a name".into());
        }
        let kind = param
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string");
        if !matches!(
            kind,
            "string" | "int" | "float" | "bool" | "date" | "enum" | "connection"
        ) {
            return Err(format!(
                "parameter {name:?}: type must be string, int, float, bool, date, enum or connection"
            ));
        }
    }
    Ok(())
}
