//! Search over the shop: where a word matches decides the rank, deprecated
//! operations come later, the persona filter counts before `total`, pages are
//! stable, and an empty query lists everything by path and method.

use docket_openapi::{MAX_SEARCH_LIMIT, Operation, SearchPage};

use crate::shop;

fn everyone(_: &Operation) -> bool {
    true
}

fn ids(page: &SearchPage) -> Vec<&str> {
    page.results
        .iter()
        .map(|result| result.operation_id.as_str())
        .collect()
}

#[test]
fn a_match_in_the_operation_id_outranks_one_in_the_description() {
    let page = shop().search("orders", &everyone, 0, 20);
    let found = ids(&page);
    let list = found
        .iter()
        .position(|id| *id == "listOrders")
        .expect("listOrders");
    let report = found
        .iter()
        .position(|id| *id == "dailyReport")
        .expect("dailyReport");
    assert!(list < report, "{found:?}");
    assert_eq!(found[0], "listOrders");
    assert!(page.results[0].score > page.results[report].score);
}

#[test]
fn camel_case_ids_and_snake_case_paths_are_split_into_words() {
    let catalog = shop();
    let page = catalog.search("order items", &everyone, 0, 5);
    assert_eq!(ids(&page)[0], "listOrderItems");
    let page = catalog.search("category tree", &everyone, 0, 5);
    assert_eq!(ids(&page)[..2], ["getCategoryTree", "replaceCategoryTree"]);
}

#[test]
fn deprecated_operations_rank_lower() {
    let page = shop().search("list orders", &everyone, 0, 20);
    let found = ids(&page);
    let current = found
        .iter()
        .position(|id| *id == "listOrders")
        .expect("listOrders");
    let legacy = found
        .iter()
        .position(|id| *id == "legacyListOrders")
        .expect("legacy");
    assert!(current < legacy, "{found:?}");
    assert!(page.results[legacy].deprecated);
}

#[test]
fn all_query_words_matching_beats_some() {
    let page = shop().search("remove item", &everyone, 0, 20);
    // deleteItem is deprecated, but it is the only one with both words.
    assert_eq!(ids(&page)[0], "deleteItem");
}

#[test]
fn a_prefix_matches_for_less_than_a_whole_word() {
    let catalog = shop();
    let page = catalog.search("categ", &everyone, 0, 20);
    assert_eq!(ids(&page), ["getCategoryTree", "replaceCategoryTree"]);
    let whole = catalog.search("category", &everyone, 0, 1);
    assert!(whole.results[0].score > page.results[0].score);
}

#[test]
fn the_persona_filter_applies_before_the_total_is_counted() {
    let catalog = shop();
    let all = catalog.search("", &everyone, 0, 100);
    let catalog_only = |operation: &Operation| operation.tags.iter().any(|tag| tag == "catalog");
    let allowed = catalog.search("", &catalog_only, 0, 100);
    assert_eq!(all.total, 12);
    assert_eq!(allowed.total, 6);
    assert!(
        allowed
            .results
            .iter()
            .all(|result| result.tags.contains(&"catalog".to_owned()))
    );
    let orders = catalog.search("orders", &catalog_only, 0, 100);
    assert_eq!(orders.total, 0);
    assert!(orders.results.is_empty());
}

#[test]
fn an_empty_query_lists_by_path_then_method_and_pages_are_stable() {
    let catalog = shop();
    let all = catalog.search("  ", &everyone, 0, 100);
    let listed: Vec<(String, String)> = all
        .results
        .iter()
        .map(|result| (result.path.clone(), result.method.clone()))
        .collect();
    assert_eq!(
        listed[0],
        ("/categories/{id}/tree".to_owned(), "GET".to_owned())
    );
    assert_eq!(
        listed[1],
        ("/categories/{id}/tree".to_owned(), "PUT".to_owned())
    );
    assert_eq!(listed[3], ("/items".to_owned(), "GET".to_owned()));
    assert_eq!(listed[4], ("/items".to_owned(), "POST".to_owned()));
    let first = catalog.search("", &everyone, 0, 5);
    let second = catalog.search("", &everyone, 5, 5);
    let third = catalog.search("", &everyone, 10, 5);
    assert_eq!(first.total, 12);
    assert_eq!(
        (
            first.results.len(),
            second.results.len(),
            third.results.len()
        ),
        (5, 5, 2)
    );
    let paged: Vec<_> = [first, second, third]
        .into_iter()
        .flat_map(|page| page.results)
        .collect();
    assert_eq!(paged, all.results);
    assert!(catalog.search("", &everyone, 50, 5).results.is_empty());
}

#[test]
fn the_limit_is_capped_and_a_long_query_is_cut() {
    let catalog = shop();
    let page = catalog.search("", &everyone, 0, usize::MAX);
    assert!(page.results.len() <= MAX_SEARCH_LIMIT);
    let long = format!("{} orders", "x".repeat(10_000));
    let page = catalog.search(&long, &everyone, 0, 10);
    // The word after the first 512 characters is never read.
    assert_eq!(page.total, 0);
}

#[test]
fn nothing_matches_an_unknown_word() {
    let page = shop().search("zeppelin", &everyone, 0, 10);
    assert_eq!(page.total, 0);
}
