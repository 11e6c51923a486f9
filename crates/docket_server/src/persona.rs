//! Personas: what a caller may do. The `personas:` and `admin:` configuration
//! sections, and [`Personas`], which picks the persona a caller's roles select.
//!
//! A persona lists the roles it applies to, a priority, and allow/deny glob
//! lists for tools and connections. The caller gets the highest-priority persona
//! one of whose roles it has; a caller no persona matches may call nothing.
//! Within a persona, a matching `deny` pattern always wins, and otherwise an
//! `allow` pattern must match: both tools and connections are denied by default.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

/// The name of the built-in administrator persona, and of the role it applies to.
pub const DEFAULT_ADMIN_PERSONA: &str = "admin";
/// The priority of the built-in administrator persona.
const BUILT_IN_ADMIN_PRIORITY: i32 = 100;

/// One entry of `personas:` (keyed by the persona's name).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PersonaConfig {
    /// The roles this persona applies to; a caller with any one of them qualifies.
    pub roles: Vec<String>,
    /// Which persona wins when a caller qualifies for several: higher wins.
    pub priority: i32,
    /// The tools this persona may call.
    pub tools: AllowDeny,
    /// The connections this persona may use.
    pub connections: AllowDeny,
    /// Method and path rules for `api` and `graphql` connections, enforced by
    /// their tools through [`Persona::check_api_route`].
    pub api_routes: Vec<ApiRouteRule>,
    /// A sentence describing the persona, for `platform_info`.
    pub description: Option<String>,
}

/// Allow and deny lists of `*` glob patterns (see [`glob_match`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct AllowDeny {
    /// Patterns of names that are allowed, unless a deny pattern matches too.
    pub allow: Vec<String>,
    /// Patterns of names that are denied, whatever `allow` says.
    pub deny: Vec<String>,
}

impl AllowDeny {
    /// Whether `name` is permitted: no deny pattern matches it and an allow
    /// pattern does.
    #[must_use]
    pub fn permits(&self, name: &str) -> bool {
        !self.deny.iter().any(|pattern| glob_match(pattern, name))
            && self.allow.iter().any(|pattern| glob_match(pattern, name))
    }

    /// Allows everything.
    fn everything() -> Self {
        Self {
            allow: vec!["*".to_owned()],
            deny: Vec::new(),
        }
    }
}

/// One `api_routes` rule: which methods and paths of matching `api`
/// connections a persona may (or may not) call.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]

pub struct ApiRouteRule {
    /// A glob over connection names.
    pub connection: String,
    /// HTTP method globs (`GET`, `HEAD`); empty means any method.
    #[serde(default)]
    pub methods: Vec<String>,
    /// Path globs (`/items*`); empty means any path.
    #[serde(default)]
    pub paths: Vec<String>,
    /// Whether a match allows or denies the call.
    #[serde(default)]
    pub action: RouteAction,
}

/// What an [`ApiRouteRule`] does to the calls it matches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteAction {
    /// The call is allowed (unless a deny rule matches too).
    #[default]
    Allow,
    /// The call is denied.
    Deny,
}

/// The `admin:` configuration section.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct AdminConfig {
    /// The name of the persona whose holders are administrators.
    pub persona: String,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self {
            persona: DEFAULT_ADMIN_PERSONA.to_owned(),
        }
    }
}

/// Every problem in the `personas:` and `admin:` sections, as human sentences
/// prefixed by the key path. Empty means valid.
#[must_use]
pub fn problems(personas: &BTreeMap<String, PersonaConfig>, admin: &AdminConfig) -> Vec<String> {
    let mut problems = Vec::new();
    if admin.persona.trim().is_empty() {
        problems.push("admin.persona: must not be empty".to_owned());
    }
    for (name, persona) in personas {
        let path = format!("personas.{name}");
        if name.trim().is_empty() {
            problems.push("personas: a persona name must not be empty".to_owned());
        }
        for (index, role) in persona.roles.iter().enumerate() {
            if role.trim().is_empty() {
                problems.push(format!("{path}.roles[{index}]: must not be empty"));
            }
        }
        for (index, rule) in persona.api_routes.iter().enumerate() {
            let rule_path = format!("{path}.api_routes[{index}]");
            if rule.connection.trim().is_empty() {
                problems.push(format!("{rule_path}.connection: must be set"));
            }
            for (method_index, method) in rule.methods.iter().enumerate() {
                // The API toolkit upper-cases methods before checking them, so
                // a lower-case pattern would silently never match.
                if method.is_empty() || *method != method.to_ascii_uppercase() {
                    problems.push(format!(
                        "{rule_path}.methods[{method_index}]: must be an upper-case HTTP method such as GET"
                    ));
                }
            }
            for (path_index, route_path) in rule.paths.iter().enumerate() {
                if !route_path.starts_with('/') && !route_path.starts_with('*') {
                    problems.push(format!(
                        "{rule_path}.paths[{path_index}]: must start with / (or *)"
                    ));
                }
            }
        }
    }
    problems
}

/// A resolved persona: what a caller may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Persona {
    /// The persona's name (its key under `personas:`).
    pub name: String,
    /// Whether holders of this persona are administrators (its name is `admin.persona`).
    pub is_admin: bool,
    /// The persona's priority.
    pub priority: i32,
    /// The roles the persona applies to.
    pub roles: Vec<String>,
    /// The persona's description, if configured.
    pub description: Option<String>,
    /// The `api_routes` rules, as configured; the API and GraphQL tools apply them
    /// through [`Persona::check_api_route`].
    pub api_routes: Vec<ApiRouteRule>,
    tools: AllowDeny,
    connections: AllowDeny,
}

impl Persona {
    fn from_config(name: &str, config: &PersonaConfig, admin: &AdminConfig) -> Self {
        Self {
            name: name.to_owned(),
            is_admin: name == admin.persona,
            priority: config.priority,
            roles: config.roles.clone(),
            description: config.description.clone(),
            api_routes: config.api_routes.clone(),
            tools: config.tools.clone(),
            connections: config.connections.clone(),
        }
    }

    /// The administrator persona used when `personas:` defines none by the name
    /// `admin.persona`: it applies to the role `admin` and may call every tool on
    /// every connection, as in the platform Docket descends from.
    fn built_in_admin(admin: &AdminConfig) -> Self {
        Self {
            name: admin.persona.clone(),
            is_admin: true,
            priority: BUILT_IN_ADMIN_PRIORITY,
            roles: vec![DEFAULT_ADMIN_PERSONA.to_owned()],
            description: Some("Administrator: every tool on every connection".to_owned()),
            api_routes: Vec::new(),
            tools: AllowDeny::everything(),
            connections: AllowDeny::everything(),
        }
    }

    /// Whether this persona may call `tool`: no `tools.deny` pattern matches
    /// and a `tools.allow` pattern does.
    #[must_use]
    pub fn may_call_tool(&self, tool: &str) -> bool {
        self.tools.permits(tool)
    }

    /// Whether this persona may use `connection`: no `connections.deny` pattern
    /// matches and a `connections.allow` pattern does. Connections are denied by
    /// default: an empty allow list grants none.
    #[must_use]
    pub fn may_use_connection(&self, connection: &str) -> bool {
        self.connections.permits(connection)
    }

    /// Whether the `api_routes` rules let this persona send `method path` to
    /// `connection`. Only the rules whose connection pattern matches count; when
    /// none does, the connection is gated by the connection rules alone. Otherwise
    /// a matching `deny` rule refuses, and a matching `allow` rule is needed.
    ///
    /// # Errors
    /// Why it is refused, in the words the caller is shown.
    pub fn check_api_route(
        &self,
        connection: &str,
        method: &str,
        path: &str,
    ) -> Result<(), String> {
        let rules: Vec<&ApiRouteRule> = self
            .api_routes
            .iter()
            .filter(|rule| glob_match(&rule.connection, connection))
            .collect();
        if rules.is_empty() {
            return Ok(());
        }
        let matches = |rule: &&&ApiRouteRule| {
            (rule.methods.is_empty() || rule.methods.iter().any(|m| glob_match(m, method)))
                && (rule.paths.is_empty() || rule.paths.iter().any(|p| glob_match(p, path)))
        };
        let refused = || {
            format!(
                "not authorized for this method/path on this connection: persona {} may not {method} {path} on {connection}",
                self.name
            )
        };
        if rules
            .iter()
            .filter(matches)
            .any(|rule| rule.action == RouteAction::Deny)
        {
            return Err(refused());
        }
        if rules
            .iter()
            .filter(matches)
            .any(|rule| rule.action == RouteAction::Allow)
        {
            Ok(())
        } else {
            Err(refused())
        }
    }

    /// The tool rules.
    #[must_use]
    pub fn tools(&self) -> &AllowDeny {
        &self.tools
    }

    /// The connection rules.
    #[must_use]
    pub fn connections(&self) -> &AllowDeny {
        &self.connections
    }
}

/// The configured personas, ready to resolve callers' roles.
#[derive(Clone, Debug)]
pub struct Personas {
    /// Sorted by priority (highest first), then by name, so that resolving is
    /// a scan for the first persona that matches.
    by_precedence: Vec<Arc<Persona>>,
}

impl Personas {
    /// Builds the personas from configuration. When no configured persona is
    /// named `admin.persona`, a built-in one is added (role `admin`, priority
    /// 100, every tool and connection allowed).
    #[must_use]
    pub fn new(personas: &BTreeMap<String, PersonaConfig>, admin: &AdminConfig) -> Self {
        let mut by_precedence: Vec<Arc<Persona>> = personas
            .iter()
            .map(|(name, config)| Arc::new(Persona::from_config(name, config, admin)))
            .collect();
        if !admin.persona.is_empty() && !personas.contains_key(&admin.persona) {
            by_precedence.push(Arc::new(Persona::built_in_admin(admin)));
        }
        by_precedence.sort_by(|a, b| {
            b.priority
                .cmp(&a.priority)
                .then_with(|| a.name.cmp(&b.name))
        });
        Self { by_precedence }
    }

    /// The highest-priority persona one of whose roles the caller has (ties go
    /// to the name that sorts first). `None` when no persona matches: the caller
    /// may call nothing.
    #[must_use]
    pub fn resolve(&self, roles: &[String]) -> Option<Arc<Persona>> {
        self.by_precedence
            .iter()
            .find(|persona| persona.roles.iter().any(|role| roles.contains(role)))
            .cloned()
    }

    /// The persona called `name`, if there is one.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<Arc<Persona>> {
        self.by_precedence
            .iter()
            .find(|persona| persona.name == name)
            .cloned()
    }

    /// Every persona, highest precedence first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Persona>> {
        self.by_precedence.iter()
    }
}

/// Whether `text` matches `pattern`, where `*` matches any run of characters
/// (including none) and every other character matches only itself. Matching is
/// case-sensitive and takes time linear in the lengths of both.
#[must_use]
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let mut pieces = pattern.split('*');
    // `split` always yields at least one piece.
    let first = pieces.next().unwrap_or_default();
    let Some(rest) = text.strip_prefix(first) else {
        return false;
    };
    let mut middle: Vec<&str> = pieces.collect();
    // No `*` at all: the pattern is a literal.
    let Some(last) = middle.pop() else {
        return rest.is_empty();
    };
    let Some(mut rest) = rest.strip_suffix(last) else {
        return false;
    };
    // Each piece between two stars is found at its leftmost place after the
    // previous one; leftmost is always best, since it leaves the most text for
    // the pieces after it. `str::find` is linear, so the whole match is too.
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_literals_and_stars() {
        assert!(glob_match("trino_query", "trino_query"));
        assert!(!glob_match("trino_query", "trino_query2"));
        assert!(!glob_match("trino_query", "Trino_query"));
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "anything at all"));
        assert!(glob_match("trino_*", "trino_"));
        assert!(glob_match("trino_*", "trino_export"));
        assert!(!glob_match("trino_*", "api_trino_export"));
        assert!(glob_match("*_export", "api_export"));
        assert!(!glob_match("*_export", "api_exports"));
        assert!(glob_match("a*b*c", "abc"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
        assert!(!glob_match("a*b*c", "acb"));
        assert!(glob_match("**", "x"));
        assert!(glob_match("/items*", "/items/42"));
        // Only `*` is special.
        assert!(!glob_match("trino_?uery", "trino_query"));
        assert!(glob_match("[a]", "[a]"));
        // Prefix and suffix must not share characters of the text.
        assert!(!glob_match("ab*ba", "aba"));
        assert!(glob_match("ab*ba", "abba"));
        // Multi-byte characters are matched as characters.
        assert!(glob_match("é*ü", "éaü"));
    }

    #[test]
    fn glob_is_fast_on_adversarial_input() {
        // A backtracking matcher takes exponential time on this; the piecewise
        // one does a handful of linear scans. The assertion is on the answer:
        // a regression to backtracking would show up as a hung test.
        let pattern = format!("{}b", "a*".repeat(64));
        let text = "a".repeat(10_000);
        assert!(!glob_match(&pattern, &text));
        assert!(glob_match(&pattern, &format!("{text}b")));
    }

    fn roles(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    fn persona(
        persona_roles: &[&str],
        priority: i32,
        tools: &[&str],
        deny: &[&str],
    ) -> PersonaConfig {
        PersonaConfig {
            roles: roles(persona_roles),
            priority,
            tools: AllowDeny {
                allow: roles(tools),
                deny: roles(deny),
            },
            connections: AllowDeny {
                allow: roles(&["warehouse", "shop-*"]),
                deny: roles(&["shop-secret"]),
            },
            ..PersonaConfig::default()
        }
    }

    fn sample() -> BTreeMap<String, PersonaConfig> {
        BTreeMap::from([
            (
                "analyst".to_owned(),
                persona(
                    &["analyst"],
                    10,
                    &["trino_*", "run_script"],
                    &["trino_export"],
                ),
            ),
            (
                "engineer".to_owned(),
                persona(&["engineer", "analyst"], 20, &["*"], &[]),
            ),
            (
                "auditor".to_owned(),
                persona(&["auditor"], 20, &["list_*"], &[]),
            ),
            ("batch".to_owned(), persona(&["auditor"], 20, &["*"], &[])),
        ])
    }

    #[test]
    fn highest_priority_wins_and_ties_go_to_the_first_name() {
        let personas = Personas::new(&sample(), &AdminConfig::default());
        let name = |caller: &[&str]| personas.resolve(&roles(caller)).map(|p| p.name.clone());
        assert_eq!(name(&["analyst"]).as_deref(), Some("engineer"));
        assert_eq!(name(&["engineer"]).as_deref(), Some("engineer"));
        // "auditor" and "batch" both have priority 20 and the role; "auditor" sorts first.
        assert_eq!(name(&["auditor"]).as_deref(), Some("auditor"));
        assert_eq!(name(&["analyst", "auditor"]).as_deref(), Some("auditor"));
        assert_eq!(name(&["nobody"]), None);
        assert_eq!(name(&[]), None);
    }

    #[test]
    fn deny_wins_and_everything_else_is_denied_by_default() {
        let personas = Personas::new(&sample(), &AdminConfig::default());
        let analyst = personas.get("analyst");
        let analyst = analyst.as_deref();
        let may_call = |tool: &str| analyst.is_some_and(|p| p.may_call_tool(tool));
        assert!(may_call("trino_query"));
        assert!(may_call("run_script"));
        assert!(!may_call("trino_export"), "deny wins over a matching allow");
        assert!(!may_call("api_invoke_endpoint"), "nothing allows it");
        let may_use = |connection: &str| analyst.is_some_and(|p| p.may_use_connection(connection));
        assert!(may_use("warehouse"));
        assert!(may_use("shop-eu"));
        assert!(!may_use("shop-secret"));
        assert!(!may_use("other"));

        let nothing = Personas::new(
            &BTreeMap::from([(
                "empty".to_owned(),
                PersonaConfig {
                    roles: roles(&["r"]),
                    ..PersonaConfig::default()
                },
            )]),
            &AdminConfig::default(),
        );
        let empty = nothing.resolve(&roles(&["r"]));
        assert!(
            empty
                .as_deref()
                .is_some_and(|p| !p.may_call_tool("platform_info"))
        );
        assert!(
            empty
                .as_deref()
                .is_some_and(|p| !p.may_use_connection("warehouse"))
        );
    }

    #[test]
    fn admin_flag_follows_the_admin_persona_name() {
        let mut configured = sample();
        configured.insert(
            "ops".to_owned(),
            persona(&["ops"], 5, &["*"], &["manage_script"]),
        );
        let personas = Personas::new(
            &configured,
            &AdminConfig {
                persona: "ops".to_owned(),
            },
        );
        let ops = personas.resolve(&roles(&["ops"]));
        assert!(
            ops.as_deref()
                .is_some_and(|p| p.is_admin && p.name == "ops")
        );
        // The configured admin persona keeps its own rules.
        assert!(
            ops.as_deref()
                .is_some_and(|p| !p.may_call_tool("manage_script"))
        );
        let engineer = personas.resolve(&roles(&["engineer"]));
        assert!(engineer.as_deref().is_some_and(|p| !p.is_admin));
        // A configured admin persona replaces the built-in one: role `admin` is nobody.
        assert_eq!(personas.resolve(&roles(&["admin"])), None);
    }

    #[test]
    fn built_in_admin_persona_when_none_is_configured() {
        let personas = Personas::new(&sample(), &AdminConfig::default());
        let admin = personas.resolve(&roles(&["analyst", "admin"]));
        let admin = admin.as_deref();
        assert!(admin.is_some_and(|p| p.is_admin && p.name == "admin" && p.priority == 100));
        assert!(admin.is_some_and(|p| p.may_call_tool("anything") && p.may_use_connection("any")));
        assert_eq!(personas.iter().count(), 5);
    }

    #[test]
    fn config_parses_with_defaults_and_refuses_unknown_actions() {
        let parsed: Result<BTreeMap<String, PersonaConfig>, _> = serde_json::from_str(
            r#"{"analyst": {"roles": ["analyst"], "tools": {"allow": ["trino_*"]},
                "api_routes": [{"connection": "shop", "methods": ["GET"], "paths": ["/items*"]},
                               {"connection": "shop", "action": "deny"}]}}"#,
        );
        let parsed = parsed.unwrap_or_default();
        let analyst = parsed.get("analyst").cloned().unwrap_or_default();
        assert_eq!(analyst.priority, 0);
        assert_eq!(analyst.tools.allow, ["trino_*"]);
        assert!(analyst.connections.allow.is_empty());
        assert_eq!(analyst.api_routes.len(), 2);
        assert_eq!(analyst.api_routes[0].action, RouteAction::Allow);
        assert_eq!(analyst.api_routes[1].action, RouteAction::Deny);
        assert!(problems(&parsed, &AdminConfig::default()).is_empty());

        assert!(
            serde_json::from_str::<ApiRouteRule>(r#"{"connection": "c", "action": "maybe"}"#)
                .is_err()
        );
        let admin: AdminConfig = serde_json::from_str("{}").unwrap_or_else(|_| AdminConfig {
            persona: String::new(),
        });
        assert_eq!(admin.persona, "admin");
    }

    #[test]
    fn problems_point_at_the_key() {
        let mut configured = BTreeMap::new();
        configured.insert(
            "p".to_owned(),
            PersonaConfig {
                roles: roles(&[""]),
                api_routes: vec![ApiRouteRule {
                    connection: String::new(),
                    methods: roles(&["get"]),
                    paths: roles(&["items"]),
                    action: RouteAction::Allow,
                }],
                ..PersonaConfig::default()
            },
        );
        assert_eq!(
            problems(
                &configured,
                &AdminConfig {
                    persona: String::new()
                }
            ),
            vec![
                "admin.persona: must not be empty",
                "personas.p.roles[0]: must not be empty",
                "personas.p.api_routes[0].connection: must be set",
                "personas.p.api_routes[0].methods[0]: must be an upper-case HTTP method such as GET",
                "personas.p.api_routes[0].paths[0]: must start with / (or *)",
            ]
        );
    }

    #[test]
    fn api_routes_allow_deny_and_leave_unruled_connections_alone() {
        let rule = |connection: &str, methods: &[&str], paths: &[&str], action| ApiRouteRule {
            connection: connection.into(),
            methods: roles(methods),
            paths: roles(paths),
            action,
        };
        let config = PersonaConfig {
            roles: roles(&["r"]),
            api_routes: vec![
                rule("shop", &["GET"], &["/items*"], RouteAction::Allow),
                rule("shop", &[], &["/items/secret*"], RouteAction::Deny),
            ],
            ..PersonaConfig::default()
        };
        let persona = Persona::from_config("p", &config, &AdminConfig::default());
        assert!(persona.check_api_route("shop", "GET", "/items").is_ok());
        assert!(persona.check_api_route("shop", "GET", "/items/7").is_ok());
        let denied = persona.check_api_route("shop", "GET", "/items/secret/1");
        assert!(denied.is_err_and(|m| m.starts_with("not authorized for this method/path")));
        assert!(
            persona.check_api_route("shop", "POST", "/items").is_err(),
            "no rule allows POST"
        );
        assert!(
            persona.check_api_route("shop", "GET", "/orders").is_err(),
            "no rule allows it"
        );
        assert!(
            persona.check_api_route("other", "DELETE", "/x").is_ok(),
            "no rule names it"
        );
    }
}
