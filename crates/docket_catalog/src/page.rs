//! [`PageCursor`]: where a newest-first page of a listing ended (assets, script
//! runs, tasks), and the opaque token a client sends back for the next page.

use time::OffsetDateTime;

/// Where a page ends: the next page holds the rows strictly before this position
/// in newest-first order (by creation time, then id). A position, not a row: it
/// stays valid when the row it came from is deleted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PageCursor {
    /// The creation time of the last row listed.
    pub created_at: OffsetDateTime,
    /// Its id, which orders rows created at the same instant.
    pub id: String,
}

impl PageCursor {
    /// The cursor as an opaque token for a client to send back.
    pub fn encode(&self) -> String {
        format!("{}:{}", self.created_at.unix_timestamp_nanos(), self.id)
    }

    /// A token from [`PageCursor::encode`]; `None` for anything else.
    pub fn decode(token: &str) -> Option<Self> {
        let (nanos, id) = token.split_once(':')?;
        let created_at = OffsetDateTime::from_unix_timestamp_nanos(nanos.parse().ok()?).ok()?;
        (!id.is_empty()).then(|| Self {
            created_at,
            id: id.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    #[test]
    fn cursors_survive_their_token() {
        let cursor = PageCursor {
            created_at: datetime!(2026-12-01 10:11:12.123456 UTC),
            id: "0123abcd".into(),
        };
        assert_eq!(PageCursor::decode(&cursor.encode()), Some(cursor));
        for token in ["", "12", "x:abc", "12:", ":abc"] {
            assert_eq!(PageCursor::decode(token), None, "{token:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any text a client sends back decodes or is refused, never panics; a
        /// decoded cursor encodes to a token that decodes to it again.
        #[test]
        fn any_token_decodes_or_is_refused(token in "\\PC{0,60}|-?[0-9]{1,40}:[0-9a-f]{0,32}") {
            if let Some(cursor) = PageCursor::decode(&token) {
                proptest::prop_assert_eq!(PageCursor::decode(&cursor.encode()), Some(cursor));
            }
        }

        /// Every cursor of a representable time survives its token.
        #[test]
        fn cursors_round_trip(nanos in -10i128.pow(18)..10i128.pow(18), id in "\\PC{1,40}") {
            let created_at = OffsetDateTime::from_unix_timestamp_nanos(nanos).expect("in range");
            let cursor = PageCursor { created_at, id };
            proptest::prop_assert_eq!(PageCursor::decode(&cursor.encode()), Some(cursor));
        }
    }
}
