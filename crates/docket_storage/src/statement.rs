//! The one way this crate runs SQL: a [`Statement`], the text of one statement
//! (a `.sql` file beside the model, or a `concat!` of literals) with its values
//! bound by position.
//!
//! diesel prepares a statement once per connection and keeps it in the
//! connection's statement cache only when the query says it is safe to cache.
//! diesel's own `sql_query` never says so (its text might be built at run
//! time), so every call through it parsed and planned the statement again: on
//! PostgreSQL one more round trip per call. A `Statement`'s text is
//! `&'static str`, fixed at compile time, so it is always safe to cache: the
//! first call on a connection prepares it, every later one binds and executes.
//! Rows come back by column name into a `QueryableByName` type, as with
//! `sql_query`.

use std::marker::PhantomData;

use diesel::QueryResult;
use diesel::backend::Backend;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::serialize::ToSql;
use diesel::sql_types::{HasSqlType, Untyped};

/// One SQL statement and the values bound to its placeholders, in order.
#[must_use = "a statement does nothing until it is executed or loaded"]
pub(crate) struct Statement<B = ()> {
    sql: &'static str,
    binds: B,
}

/// The statement with this text and no values bound yet.
pub(crate) fn statement(sql: &'static str) -> Statement {
    Statement { sql, binds: () }
}

impl<B> Statement<B> {
    /// Binds the next placeholder (`$n` on PostgreSQL, `?n` on SQLite) to
    /// `value`, sent as SQL type `ST`.
    pub(crate) fn bind<ST, V>(self, value: V) -> Statement<Bound<B, ST, V>> {
        Statement {
            sql: self.sql,
            binds: Bound {
                earlier: self.binds,
                value,
                sql_type: PhantomData,
            },
        }
    }
}

/// The values bound so far: the earlier ones, then one more.
pub(crate) struct Bound<Earlier, ST, V> {
    earlier: Earlier,
    value: V,
    // fn() -> ST: the marker type is never held, so it does not decide Send.
    sql_type: PhantomData<fn() -> ST>,
}

/// A list of bound values that can be sent to backend `DB`.
pub(crate) trait Binds<DB: Backend> {
    /// Collects the values, first bound first.
    fn collect<'b>(&'b self, out: &mut AstPass<'_, 'b, DB>) -> QueryResult<()>;
}

impl<DB: Backend> Binds<DB> for () {
    fn collect<'b>(&'b self, _out: &mut AstPass<'_, 'b, DB>) -> QueryResult<()> {
        Ok(())
    }
}

impl<DB, Earlier, ST, V> Binds<DB> for Bound<Earlier, ST, V>
where
    DB: Backend + HasSqlType<ST>,
    Earlier: Binds<DB>,
    V: ToSql<ST, DB>,
{
    fn collect<'b>(&'b self, out: &mut AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.earlier.collect(out)?;
        out.push_bind_param_value_only(&self.value)
    }
}

impl<DB: Backend, B: Binds<DB>> QueryFragment<DB> for Statement<B> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        // Unlike `sql_query`, no `unsafe_to_cache_prepared`: the text is static.
        out.push_sql(self.sql);
        self.binds.collect(&mut out)
    }
}

impl<B> QueryId for Statement<B> {
    // No static id: the cache keys a statement by its text and bind types.
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<B> Query for Statement<B> {
    type SqlType = Untyped;
}

impl<Conn, B> diesel::RunQueryDsl<Conn> for Statement<B> {}
