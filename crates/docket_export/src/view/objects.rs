//! JSON objects as rows, shared by JSON and JSON Lines pages: the columns are the keys
//! in the order they first appear within the page, and a value is shown as its text
//! when it is a string and as compact JSON otherwise.

use std::collections::HashMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use super::error::ViewError;
use super::limits::{MAX_COLUMNS, shown_cell};
use super::page::RowPage;

/// A JSON object's members in the order they are written (`serde_json`'s own map
/// sorts its keys unless a feature asks otherwise).
struct OrderedObject(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for OrderedObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;

        impl<'de> Visitor<'de> for Members {
            type Value = OrderedObject;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("a JSON object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedObject, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some(member) = map.next_entry::<String, Value>()? {
                    members.push(member);
                }
                Ok(OrderedObject(members))
            }
        }

        deserializer.deserialize_map(Members)
    }
}

/// The rows of a page being gathered from JSON objects.
#[derive(Debug, Default)]
pub(super) struct ObjectRows {
    columns: Vec<String>,
    column_of: HashMap<String, usize>,
    rows: Vec<Vec<String>>,
}

impl ObjectRows {
    /// How many rows are gathered.
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Adds row `row`, the JSON text `bytes`. Keys past the first [`MAX_COLUMNS`]
    /// of the page are left out.
    ///
    /// # Errors
    ///
    /// [`ViewError::Malformed`] when `bytes` is not one JSON object.
    pub(super) fn push(&mut self, row: u64, bytes: &[u8]) -> Result<(), ViewError> {
        let OrderedObject(members) = serde_json::from_slice(bytes)
            .map_err(|error| ViewError::malformed(format!("row {row}: {error}")))?;
        let mut cells = vec![String::new(); self.columns.len()];
        for (key, value) in members {
            let column = match self.column_of.get(&key) {
                Some(&column) => column,
                None if self.columns.len() < MAX_COLUMNS => {
                    let column = self.columns.len();
                    self.column_of.insert(key.clone(), column);
                    self.columns.push(key);
                    cells.push(String::new());
                    column
                }
                None => continue,
            };
            cells[column] = match value {
                Value::String(text) => shown_cell(&text),
                other => shown_cell(&other.to_string()),
            };
        }
        self.rows.push(cells);
        Ok(())
    }

    /// The page, every row as wide as the columns found.
    pub(super) fn into_page(self, first_row: u64, more: bool) -> RowPage {
        let width = self.columns.len();
        let rows = self
            .rows
            .into_iter()
            .map(|mut cells| {
                cells.resize(width, String::new());
                cells
            })
            .collect();
        RowPage {
            columns: self.columns.iter().map(|name| shown_cell(name)).collect(),
            rows,
            first_row,
            more,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ObjectRows;

    #[test]
    fn columns_come_in_order_of_first_appearance() {
        let mut rows = ObjectRows::default();
        rows.push(0, br#"{"b":1,"a":"x"}"#).expect("an object");
        rows.push(1, br#"{"c":null,"a":[1, 2],"b":{"k":true}}"#)
            .expect("an object");
        let page = rows.into_page(0, false);
        assert_eq!(page.columns, ["b", "a", "c"]);
        assert_eq!(page.rows[0], ["1", "x", ""]);
        assert_eq!(page.rows[1], [r#"{"k":true}"#, "[1,2]", "null"]);
    }

    #[test]
    fn a_row_that_is_not_an_object_is_malformed() {
        let mut rows = ObjectRows::default();
        for bad in [&b"[1]"[..], b"3", b"{\"a\":", b"{} {}", b"\"\xff\""] {
            let error = rows.push(7, bad).expect_err("not one object");
            assert!(error.to_string().contains("row 7"), "{error}");
        }
    }
}
