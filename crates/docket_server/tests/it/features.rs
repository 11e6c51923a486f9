//! Resources, prompts and completions an embedder registers, in both protocol eras.

use docket_protocol::completion::CompletionReference;
use docket_protocol::mrtr::{ElicitRequestParams, InputRequest};
use docket_protocol::prompts::PromptMessage;
use docket_protocol::tools::ResourceContents;
use docket_server::{
    App, CompletionRequest, Config, PromptOutcome, PromptRequest, PromptSpec, ResourceError,
    ResourceRead, ResourceSpec, ResourceTemplateSpec,
};
use serde_json::{Value, json};

use crate::support::{Backend, TestServer, key_of, on_both_backends, users};

fn text(uri: &str, text: &str) -> ResourceContents {
    ResourceContents {
        uri: uri.to_owned(),
        mime_type: Some("text/plain".to_owned()),
        text: Some(text.to_owned()),
        blob: None,
        meta: None,
    }
}

/// An app with one resource, a template whose reads are alice's alone, a prompt
/// that asks first, and completions for its argument.
fn app() -> App {
    let yaml = "personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"]), ("bob", &["analyst"])]);
    App::builder(config)
        .resource(
            ResourceSpec::new("demo://readme", "Readme").with_mime_type("text/plain"),
            |read: ResourceRead| async move { Ok(vec![text(&read.uri, "read me")]) },
        )
        .and_then(|builder| {
            builder.resource_template(
                ResourceTemplateSpec::new("demo://notes/{owner}/{id}", "Notes"),
                |read: ResourceRead| async move {
                    // Only the owner's notes exist for them; anyone else's read as absent.
                    let owner = read.variables.get("owner").cloned().unwrap_or_default();
                    if read.identity.subject != format!("apikey:{owner}") {
                        return Err(ResourceError::NotFound);
                    }
                    let id = read.variables.get("id").cloned().unwrap_or_default();
                    Ok(vec![text(&read.uri, &format!("note {id} of {owner}"))])
                },
            )
        })
        .and_then(|builder| {
            builder.prompt(
                PromptSpec::new("explore", "Explore a table.").with_argument(
                    "table",
                    "The table to explore.",
                    true,
                ),
                |request: PromptRequest| async move {
                    let table = request.arguments.get("table").cloned().unwrap_or_default();
                    let Some(round) = request.input else {
                        let question = InputRequest::Elicit(ElicitRequestParams::form(
                            "How deep?",
                            json!({"type": "object", "properties": {"depth": {"type": "string"}}}),
                        ));
                        return Ok(PromptOutcome::InputRequired {
                            requests: [("depth".to_owned(), question)].into_iter().collect(),
                            state: json!({"table": table}),
                        });
                    };
                    let depth = round.responses["depth"]["content"]["depth"]
                        .as_str()
                        .unwrap_or("shallow")
                        .to_owned();
                    Ok(PromptOutcome::Messages {
                        description: None,
                        messages: vec![PromptMessage::user(format!(
                            "Explore {table} ({depth}); remembered {}",
                            round.state["table"]
                        ))],
                    })
                },
            )
        })
        .map(|builder| {
            builder.completion(
                CompletionReference::Prompt {
                    name: "explore".to_owned(),
                },
                |request: CompletionRequest| async move {
                    ["orders", "customers", "order_items"]
                        .into_iter()
                        .filter(|table| table.starts_with(request.value.as_str()))
                        .map(str::to_owned)
                        .collect()
                },
            )
        })
        .expect("features")
        .build()
        .expect("app")
}

async fn rpc(server: &TestServer, user: &str, method: &str, params: Value) -> (u16, Value) {
    server
        .rpc(method, params)
        .capabilities(json!({"elicitation": {"form": {}}}))
        .header("x-api-key", &key_of(user))
        .send()
        .await
}

#[tokio::test]
async fn registered_resources_prompts_and_completions_are_served() {
    let server = TestServer::start(app()).await;
    let (_, discovered) = rpc(&server, "alice", "server/discover", json!({})).await;
    let capabilities = &discovered["result"]["capabilities"];
    for feature in ["resources", "prompts", "completions"] {
        assert!(
            capabilities[feature].is_object(),
            "{feature}: {capabilities}"
        );
    }

    let (_, listed) = rpc(&server, "alice", "resources/list", json!({})).await;
    assert_eq!(
        listed["result"]["resources"][0]["uri"], "demo://readme",
        "{listed}"
    );
    assert!(listed["result"]["ttlMs"].is_u64() && listed["result"]["cacheScope"].is_string());
    let (_, templates) = rpc(&server, "alice", "resources/templates/list", json!({})).await;
    assert_eq!(
        templates["result"]["resourceTemplates"][0]["uriTemplate"],
        "demo://notes/{owner}/{id}"
    );
    let (_, read) = rpc(
        &server,
        "alice",
        "resources/read",
        json!({"uri": "demo://notes/alice/7"}),
    )
    .await;
    assert_eq!(
        read["result"]["contents"][0]["text"], "note 7 of alice",
        "{read}"
    );

    // Another's note and a URI nothing names get the same answer, byte for byte
    // but for the URI it names.
    let (status, theirs) = rpc(
        &server,
        "bob",
        "resources/read",
        json!({"uri": "demo://notes/alice/7"}),
    )
    .await;
    let (_, nothing) = rpc(
        &server,
        "bob",
        "resources/read",
        json!({"uri": "demo://nothing/here"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(theirs["error"]["code"], -32602, "{theirs}");
    assert_eq!(theirs["error"]["message"], nothing["error"]["message"]);
    assert_eq!(theirs["error"]["data"]["uri"], "demo://notes/alice/7");

    // A prompt asks first; its state comes back sealed and cannot be reused by another.
    let (_, asked) = rpc(
        &server,
        "alice",
        "prompts/get",
        json!({"name": "explore", "arguments": {"table": "orders"}}),
    )
    .await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"]
        .as_str()
        .expect("state")
        .to_owned();
    let answer = json!({"name": "explore", "arguments": {"table": "orders"},
                        "inputResponses": {"depth": {"action": "accept", "content": {"depth": "deep"}}},
                        "requestState": state});
    let (_, got) = rpc(&server, "alice", "prompts/get", answer.clone()).await;
    let said = got["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        said, "Explore orders (deep); remembered \"orders\"",
        "{got}"
    );
    let (_, stolen) = rpc(&server, "bob", "prompts/get", answer).await;
    assert_eq!(stolen["error"]["code"], -32602, "{stolen}");
    let (_, missing) = rpc(&server, "alice", "prompts/get", json!({"name": "explore"})).await;
    assert_eq!(
        missing["error"]["code"], -32602,
        "a required argument: {missing}"
    );
    let (_, unknown) = rpc(&server, "alice", "prompts/get", json!({"name": "nope"})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    let (_, completed) = rpc(
        &server,
        "alice",
        "completion/complete",
        json!({
        "ref": {"type": "ref/prompt", "name": "explore"},
        "argument": {"name": "table", "value": "ord"}}),
    )
    .await;
    assert_eq!(
        completed["result"]["completion"]["values"],
        json!(["orders", "order_items"]),
        "{completed}"
    );
}

#[tokio::test]
async fn without_registrations_the_methods_do_not_exist() {
    let server = TestServer::start(
        App::builder(Config::embedded_default())
            .build()
            .expect("app"),
    )
    .await;
    let (status, body) = server.rpc("resources/list", json!({})).send().await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], -32601);
    let (_, discovered) = server.rpc("server/discover", json!({})).send().await;
    assert!(
        discovered["result"]["capabilities"]
            .get("prompts")
            .is_none(),
        "{discovered}"
    );
}

#[tokio::test]
async fn sessions_of_the_earlier_era_are_served_the_same_features() {
    let server = TestServer::start(app()).await;
    let post = |session: Option<&str>, message: Value| {
        let mut request = server
            .http
            .post(server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("x-api-key", key_of("alice"))
            .json(&message);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let opened = post(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "features-tests", "version": "0"}}}),
    )
    .await
    .expect("initialize");
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .expect("id")
        .to_owned();
    let init: Value = opened.json().await.expect("json");
    assert!(
        init["result"]["capabilities"]["resources"].is_object(),
        "{init}"
    );
    let ask = |method: &str, params: Value| {
        post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params}),
        )
    };
    let read: Value = ask("resources/read", json!({"uri": "demo://readme"}))
        .await
        .expect("read")
        .json()
        .await
        .expect("json");
    assert_eq!(read["result"]["contents"][0]["text"], "read me", "{read}");
    for dropped in ["resultType", "ttlMs", "cacheScope"] {
        assert!(read["result"].get(dropped).is_none(), "{dropped} in {read}");
    }
    // A prompt that asks first cannot ask a session: refused with the way forward.
    let asked: Value = ask(
        "prompts/get",
        json!({"name": "explore", "arguments": {"table": "t"}}),
    )
    .await
    .expect("get")
    .json()
    .await
    .expect("json");
    assert_eq!(asked["error"]["code"], -32602, "{asked}");
}

on_both_backends!(the_prompt_library_is_kept_and_offered_to_those_it_is_shared_with);

async fn the_prompt_library_is_kept_and_offered_to_those_it_is_shared_with(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let store = database.connect().await;
    let yaml = "connections:\n\
                \x20 warehouse: { kind: trino, url: \"http://127.0.0.1:9\", user: docket }\n\
                personas:\n\
                \x20 analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n\
                \x20 viewer: { roles: [viewer], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[
        ("alice", &["analyst"]),
        ("bob", &["analyst"]),
        ("carol", &["viewer"]),
        ("root", &["admin"]),
    ]);
    let app = App::builder(config)
        .prompt_library(store.prompt_library())
        .build()
        .expect("app");
    let server = TestServer::start(app).await;
    let manage = |user: &'static str, arguments: Value| {
        let server = &server;
        async move {
            let (_, body) = server
                .rpc(
                    "tools/call",
                    json!({"name": "manage_prompt", "arguments": arguments}),
                )
                .header("x-api-key", &key_of(user))
                .send()
                .await;
            body["result"].clone()
        }
    };
    let names = |listed: &Value| -> Vec<String> {
        listed["result"]["prompts"]
            .as_array()
            .map(|prompts| {
                prompts
                    .iter()
                    .filter_map(|prompt| prompt["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };

    let created = manage(
        "alice",
        json!({"command": "create", "name": "weekly", "description": "A weekly summary.",
               "template": "Summarize {{table}} for the week.",
               "arguments": [{"name": "table", "description": "The table.", "required": true}],
               "scripts": ["profile"], "shared_with": ["analyst"]}),
    )
    .await;
    assert_eq!(
        created["structuredContent"]["owner"], "apikey:alice",
        "{created}"
    );

    // Offered to the persona it is shared with and to administrators, with the
    // built-in prompts; not to anyone else.
    for (user, sees) in [("bob", true), ("root", true), ("carol", false)] {
        let (_, listed) = rpc(&server, user, "prompts/list", json!({})).await;
        let listed = names(&listed);
        assert_eq!(
            listed.contains(&"weekly".to_owned()),
            sees,
            "{user}: {listed:?}"
        );
        assert!(listed.contains(&"explore_table".to_owned()), "{listed:?}");
    }
    let (_, got) = rpc(
        &server,
        "bob",
        "prompts/get",
        json!({"name": "weekly", "arguments": {"table": "orders"}}),
    )
    .await;
    let text = got["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("Summarize orders for the week."), "{got}");
    assert!(text.contains("profile"), "the scripts it runs with: {text}");
    let (_, hidden) = rpc(
        &server,
        "carol",
        "prompts/get",
        json!({"name": "weekly", "arguments": {"table": "orders"}}),
    )
    .await;
    let (_, unknown) = rpc(&server, "carol", "prompts/get", json!({"name": "nothing"})).await;
    assert_eq!(hidden["error"]["code"], -32602, "{hidden}");
    assert_eq!(
        hidden["error"]["message"]
            .as_str()
            .map(|m| m.replace("weekly", "?")),
        unknown["error"]["message"]
            .as_str()
            .map(|m| m.replace("nothing", "?"))
    );
    let (_, missing) = rpc(&server, "bob", "prompts/get", json!({"name": "weekly"})).await;
    assert_eq!(
        missing["error"]["code"], -32602,
        "a required argument: {missing}"
    );

    // Only its owner (or an administrator) changes it; to anyone else it is not there.
    let refused = manage(
        "bob",
        json!({"command": "update", "name": "weekly", "description": "Mine now."}),
    )
    .await;
    assert_eq!(refused["isError"], true, "{refused}");
    let said = refused["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        said.contains("only its owner"),
        "bob sees it, so he is told why: {said}"
    );
    let hidden = manage("carol", json!({"command": "delete", "name": "weekly"})).await;
    let said = hidden["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        said.contains("no prompt named"),
        "carol does not see it: {said}"
    );
    let updated = manage(
        "alice",
        json!({"command": "update", "name": "weekly", "description": "Every Monday."}),
    )
    .await;
    assert_eq!(
        updated["structuredContent"]["description"], "Every Monday.",
        "{updated}"
    );
    assert_eq!(
        updated["structuredContent"]["template"],
        "Summarize {{table}} for the week."
    );

    // Names the server provides are taken; placeholders must be declared.
    let reserved = manage(
        "alice",
        json!({"command": "create", "name": "explore_table",
        "description": "d", "template": "t"}),
    )
    .await;
    assert_eq!(reserved["isError"], true, "{reserved}");
    let undeclared = manage(
        "alice",
        json!({"command": "create", "name": "broken",
        "description": "d", "template": "{{nope}}"}),
    )
    .await;
    assert!(
        undeclared["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("nope"),
        "{undeclared}"
    );
    // An unknown command is refused with the known ones named.
    let (_, unknown_command) = server
        .rpc(
            "tools/call",
            json!({"name": "manage_prompt", "arguments": {"command": "rename"}}),
        )
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    let said = unknown_command["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        said.contains("create") && said.contains("delete"),
        "{unknown_command}"
    );

    // A built-in prompt fills in what it is given.
    let (_, explore) = rpc(
        &server,
        "carol",
        "prompts/get",
        json!({"name": "explore_table", "arguments": {"table": "memory.default.orders"}}),
    )
    .await;
    let said = explore["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        said.contains("memory.default.orders") && said.contains("trino_describe_table"),
        "{explore}"
    );

    assert_eq!(
        manage("alice", json!({"command": "delete", "name": "weekly"})).await["structuredContent"]
            ["deleted"],
        "weekly"
    );
    let (_, listed) = rpc(&server, "bob", "prompts/list", json!({})).await;
    assert!(!names(&listed).contains(&"weekly".to_owned()));
}

on_both_backends!(the_prompt_library_is_listed_a_page_at_a_time_and_capped_per_owner);

/// `prompts/list` and `manage_prompt list` page through the library with cursors,
/// each prompt once; one identity keeps at most `server.max_prompts_per_owner`
/// prompts, and the refusal names the limit.
async fn the_prompt_library_is_listed_a_page_at_a_time_and_capped_per_owner(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let store = database.connect().await;
    let yaml = "server: { max_prompts_per_owner: 102 }\n\
                rate_limit: { requests_per_minute: 100000, burst: 1000 }\n\
                personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"]), ("bob", &["analyst"])]);
    let app = App::builder(config)
        .prompt_library(store.prompt_library())
        .build()
        .expect("app");
    let server = TestServer::start(app).await;
    let manage = |user: &'static str, arguments: Value| {
        let server = &server;
        async move {
            let (_, body) = server
                .rpc(
                    "tools/call",
                    json!({"name": "manage_prompt", "arguments": arguments}),
                )
                .header("x-api-key", &key_of(user))
                .send()
                .await;
            body["result"].clone()
        }
    };
    let create = |user: &'static str, name: String| {
        manage(
            user,
            json!({"command": "create", "name": name, "description": "d", "template": "t"}),
        )
    };
    for index in 0..102 {
        let created = create("alice", format!("p{index:03}")).await;
        assert_ne!(created["isError"], true, "{created}");
    }
    let refused = create("alice", "one-too-many".to_owned()).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(
        refused["structuredContent"]["error"]["code"], "limit_reached",
        "{refused}"
    );
    let said = refused["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(said.contains("102"), "the refusal names the limit: {said}");
    let theirs = create("bob", "bobs".to_owned()).await;
    assert_ne!(
        theirs["isError"], true,
        "another owner is not held back: {theirs}"
    );

    // prompts/list: the built-in prompts and the first page, then the rest.
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let (_, page) = server
            .rpc("prompts/list", params)
            .header("x-api-key", &key_of("alice"))
            .send()
            .await;
        pages += 1;
        listed.extend(
            page["result"]["prompts"]
                .as_array()
                .expect("prompts")
                .iter()
                .filter_map(|prompt| prompt["name"].as_str().map(str::to_owned)),
        );
        match page["result"]["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 2, "102 of alice's prompts take two pages of 100");
    let mut distinct = listed.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), listed.len(), "each prompt once");
    assert_eq!(
        listed.len(),
        3 + 102,
        "the built-in prompts and alice's own"
    );
    assert!(!listed.contains(&"bobs".to_owned()), "bob's is not shared");
    let (_, bad) = server
        .rpc("prompts/list", json!({"cursor": "not-a-cursor"}))
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");

    // manage_prompt list: pages of the size asked for, newest first.
    let mut names = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let mut arguments = json!({"command": "list", "limit": 40});
        if let Some(token) = cursor.as_str() {
            arguments["cursor"] = json!(token);
        }
        let page = manage("alice", arguments).await;
        let prompts = page["structuredContent"]["prompts"]
            .as_array()
            .expect("prompts")
            .clone();
        assert!(prompts.len() <= 40, "{page}");
        names.extend(
            prompts
                .iter()
                .filter_map(|prompt| prompt["name"].as_str().map(str::to_owned)),
        );
        cursor = page["structuredContent"]["next_cursor"].clone();
        if cursor.is_null() {
            break;
        }
    }
    assert_eq!(names.len(), 102, "{names:?}");
    assert_eq!(
        names.first().map(String::as_str),
        Some("p101"),
        "newest first"
    );
}
