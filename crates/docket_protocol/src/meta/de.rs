//! Reading the capability and implementation objects of `_meta` key by key.
//!
//! They keep unknown keys "as sent", which `#[serde(flatten)]` would do by buffering
//! the whole object into an intermediate tree first; these readers put each known
//! key straight into its field and only the unknown ones into `extra`, so reading a
//! request's `_meta` allocates little more than what it keeps. Every request of the
//! current era carries them, so this is on every call's path.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::{ClientCapabilities, ElicitationCapability, Implementation};

/// An object key, borrowed from the input where the input allows it.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("an object key")
            }
            fn visit_borrowed_str<E: serde::de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, key: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// Reads an object whose known keys each `field` takes (returning whether it knew the
/// key); every other key goes into `extra` with its value as sent.
fn read_object<'de, A, T>(
    mut map: A,
    mut target: T,
    extra: fn(&mut T) -> &mut crate::JsonObject,
    mut field: impl FnMut(&mut T, &str, &mut A) -> Result<bool, A::Error>,
) -> Result<T, A::Error>
where
    A: MapAccess<'de>,
{
    while let Some(Key(key)) = map.next_key()? {
        if !field(&mut target, &key, &mut map)? {
            let value = map.next_value()?;
            extra(&mut target).insert(key.into_owned(), value);
        }
    }
    Ok(target)
}

impl<'de> Deserialize<'de> for ClientCapabilities {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = ClientCapabilities;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("an object of client capabilities")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                read_object(
                    map,
                    ClientCapabilities::default(),
                    |capabilities| &mut capabilities.extra,
                    |capabilities, key, map| {
                        match key {
                            "elicitation" => capabilities.elicitation = map.next_value()?,
                            "sampling" => capabilities.sampling = map.next_value()?,
                            "roots" => capabilities.roots = map.next_value()?,
                            "extensions" => capabilities.extensions = map.next_value()?,
                            _ => return Ok(false),
                        }
                        Ok(true)
                    },
                )
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

impl<'de> Deserialize<'de> for ElicitationCapability {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = ElicitationCapability;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("an object of elicitation modes")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                read_object(
                    map,
                    ElicitationCapability::default(),
                    |elicitation| &mut elicitation.extra,
                    |elicitation, key, map| {
                        match key {
                            "form" => elicitation.form = map.next_value()?,
                            "url" => elicitation.url = map.next_value()?,
                            _ => return Ok(false),
                        }
                        Ok(true)
                    },
                )
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

impl<'de> Deserialize<'de> for Implementation {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Implementation;
            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("an object with a name and a version")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let (name, version, extra) = read_object(
                    map,
                    (None, None, crate::JsonObject::new()),
                    |(_, _, extra)| extra,
                    |(name, version, _), key, map| {
                        match key {
                            "name" => *name = Some(map.next_value::<String>()?),
                            "version" => *version = Some(map.next_value::<String>()?),
                            _ => return Ok(false),
                        }
                        Ok(true)
                    },
                )?;
                Ok(Implementation {
                    name: name.ok_or_else(|| A::Error::missing_field("name"))?,
                    version: version.ok_or_else(|| A::Error::missing_field("version"))?,
                    extra,
                })
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn known_keys_fill_fields_and_the_rest_is_kept_as_sent() {
        let sent = json!({
            "elicitation": { "form": {}, "mode": "x" },
            "extensions": { "io.modelcontextprotocol/tasks": {} },
            "experimental": { "a": [1, 2] },
            "sampling": null
        });
        let capabilities = ClientCapabilities::deserialize(&sent).expect("capabilities");
        assert!(capabilities.declares_tasks());
        assert!(capabilities.supports_form_elicitation());
        assert!(!capabilities.supports_sampling());
        assert_eq!(capabilities.extra["experimental"], json!({ "a": [1, 2] }));
        let elicitation = capabilities.elicitation.as_ref().expect("elicitation");
        assert_eq!(elicitation.extra["mode"], json!("x"));
        // Read from text as well as from a tree, escaped keys included.
        let text = r#"{"extensions":{"x":{}},"ro\u006fts":{}}"#;
        let from_text: ClientCapabilities = serde_json::from_str(text).expect("from text");
        assert!(from_text.declares_extension("x"));
        assert!(from_text.supports_roots());
    }

    #[test]
    fn an_implementation_needs_a_name_and_a_version() {
        let info: Implementation =
            serde_json::from_value(json!({ "name": "c", "version": "1", "title": "C" }))
                .expect("info");
        assert_eq!((info.name.as_str(), info.version.as_str()), ("c", "1"));
        assert_eq!(info.extra["title"], json!("C"));
        let missing = serde_json::from_value::<Implementation>(json!({ "name": "c" }))
            .expect_err("no version");
        assert!(
            missing.to_string().contains("missing field `version`"),
            "{missing}"
        );
        let wrong = serde_json::from_value::<Implementation>(json!({ "name": 1, "version": "1" }))
            .expect_err("a number is no name");
        assert!(wrong.to_string().contains("invalid type"), "{wrong}");
        assert!(serde_json::from_value::<ClientCapabilities>(json!([1])).is_err());
    }
}
