//! Reading the files that deploy crawlfleet: the code, .env.example, Terraform,
//! the ECS JSON, the compose file and the Dockerfile.

use std::{
    collections::{BTreeSet, HashMap},
    fs,
    path::Path,
};

use hcl::expr::{BinaryOperator, Operation, TraversalOperator};
use hcl::{Block, Body, Expression, ObjectKey};
use serde_json::{Value as Json, json};

pub fn read(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    fs::read_to_string(&full).unwrap_or_else(|e| panic!("reading {}: {e}", full.display()))
}

/// Every .rs file under src/, concatenated.
pub fn code() -> String {
    fn walk(dir: &Path, out: &mut String) {
        for path in fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push_str(&fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = String::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out
}

/// The `default_value_t` of the clap argument with `env = "NAME"`, else .env.example's value.
pub fn code_default(name: &str) -> u64 {
    let in_code = code().lines().find_map(|line| {
        let rest = line.split_once(&format!("env = \"{name}\""))?.1;
        let value = rest.split_once("default_value_t = ")?.1;
        value
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse::<u64>()
            .ok()
    });
    // A set line, else a commented one documenting the default (`# NAME=10`).
    let in_example = || {
        let example = read(".env.example");
        let value = |prefix: String| {
            example
                .lines()
                .find_map(|l| l.strip_prefix(&prefix)?.trim().parse::<u64>().ok())
        };
        value(format!("{name}=")).or_else(|| value(format!("# {name}=")))
    };
    in_code
        .or_else(in_example)
        .unwrap_or_else(|| panic!("no default for {name} in src/ or .env.example"))
}

/// The variables .env.example lists, set (`NAME=...`) or commented out (`# NAME=...`),
/// by the rule of the config test in src/config.rs.
pub fn env_example_names() -> BTreeSet<String> {
    read(".env.example")
        .lines()
        .filter_map(|line| {
            let (name, _) = line.trim_start_matches("# ").split_once('=')?;
            let is_name = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            is_name.then(|| name.to_owned())
        })
        .collect()
}

pub fn text(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A number, however JSON or Terraform wrote it (20, 20.0).
pub fn number(value: &Json) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("not a number: {value}"))
}

/// An HCL expression as written in the .tf file.
pub fn source(expr: &Expression) -> String {
    hcl::format::to_string(expr).unwrap()
}

/// The expression of attribute `key` of a block's body.
pub fn attr<'a>(body: &'a Body, key: &str) -> &'a Expression {
    body.attributes()
        .find(|a| a.key() == key)
        .unwrap_or_else(|| panic!("no attribute {key}"))
        .expr()
}

/// The nested blocks `name` of a block's body.
pub fn nested<'a>(body: &'a Body, name: &'a str) -> impl Iterator<Item = &'a Body> {
    body.blocks()
        .filter(move |b| b.identifier() == name)
        .map(Block::body)
}

/// The first nested block `name` of a block's body.
pub fn first<'a>(body: &'a Body, name: &'a str) -> &'a Body {
    nested(body, name)
        .next()
        .unwrap_or_else(|| panic!("no {name} block"))
}

/// `variable` defaults, `locals`, `resource` and `data` blocks of infra/*.tf. Values
/// evaluate to JSON as far as the checks need: literals, var.* / local.* (and
/// their attributes), tostring(), jsonencode() (as its value), concat(), `==` / `!=` and `? :` on what
/// evaluates, with the variables' defaults; templates stay as written and
/// anything else (resource attributes) becomes null.
pub struct Terraform {
    vars: HashMap<String, Expression>,
    locals: HashMap<String, Expression>,
    blocks: Vec<Block>,
}

impl Terraform {
    pub fn load() -> Self {
        let (mut vars, mut locals, mut blocks) = (HashMap::new(), HashMap::new(), Vec::new());
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("infra");
        for path in fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
            if path.extension().is_none_or(|e| e != "tf") {
                continue;
            }
            let body = hcl::parse(&fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for block in body.into_blocks() {
                let mut attrs = block.body().attributes();
                match block.identifier() {
                    "variable" => {
                        if let Some(default) = attrs.find(|a| a.key() == "default") {
                            vars.insert(
                                block.labels()[0].as_str().to_owned(),
                                default.expr().clone(),
                            );
                        }
                    }
                    "locals" => {
                        locals.extend(attrs.map(|a| (a.key().to_owned(), a.expr().clone())))
                    }
                    "resource" | "data" => blocks.push(block.clone()),
                    _ => {}
                }
            }
        }
        Terraform {
            vars,
            locals,
            blocks,
        }
    }

    /// The expression of `var.NAME` (its default) or `local.NAME`.
    pub fn expr(&self, scope: &str, name: &str) -> &Expression {
        let map = if scope == "var" {
            &self.vars
        } else {
            &self.locals
        };
        map.get(name)
            .unwrap_or_else(|| panic!("{scope}.{name} has no value in infra/"))
    }

    pub fn get(&self, scope: &str, name: &str) -> Json {
        self.eval(self.expr(scope, name))
    }

    /// Every `resource "KIND" ...` (or `data`), by name.
    pub fn all<'a>(&'a self, block: &'a str, kind: &'a str) -> impl Iterator<Item = &'a Body> {
        self.blocks
            .iter()
            .filter(move |b| b.identifier() == block && b.labels()[0].as_str() == kind)
            .map(Block::body)
    }

    pub fn resource(&self, kind: &str, name: &str) -> &Body {
        self.block("resource", kind, name)
    }

    pub fn data(&self, kind: &str, name: &str) -> &Body {
        self.block("data", kind, name)
    }

    fn block(&self, block: &str, kind: &str, name: &str) -> &Body {
        self.blocks
            .iter()
            .find(|b| {
                b.identifier() == block
                    && b.labels()[0].as_str() == kind
                    && b.labels()[1].as_str() == name
            })
            .unwrap_or_else(|| panic!("no {block} {kind}.{name} in infra/"))
            .body()
    }

    pub fn eval(&self, expr: &Expression) -> Json {
        match expr {
            Expression::Number(n) => n.as_i64().map_or_else(|| json!(n.as_f64()), Json::from),
            Expression::String(s) => Json::from(s.as_str()),
            Expression::Bool(b) => Json::from(*b),
            Expression::Array(items) => items.iter().map(|e| self.eval(e)).collect(),
            Expression::Object(fields) => fields
                .iter()
                .map(|(key, value)| {
                    let key = match key {
                        ObjectKey::Identifier(i) => i.as_str().to_owned(),
                        ObjectKey::Expression(e) => text(&self.eval(e)),
                        other => panic!("unsupported object key {other:?}"),
                    };
                    (key, self.eval(value))
                })
                .collect(),
            Expression::TemplateExpr(t) => Json::from(t.to_string()),
            Expression::FuncCall(f) if f.name.name.as_str() == "tostring" => {
                Json::from(text(&self.eval(&f.args[0])))
            }
            // The value itself: what the JSON says is what the checks read.
            Expression::FuncCall(f) if f.name.name.as_str() == "jsonencode" => {
                self.eval(&f.args[0])
            }
            Expression::FuncCall(f) if f.name.name.as_str() == "concat" => {
                let lists: Vec<Json> = f.args.iter().map(|a| self.eval(a)).collect();
                if lists.iter().all(Json::is_array) {
                    lists
                        .into_iter()
                        .flat_map(|l| l.as_array().unwrap().clone())
                        .collect()
                } else {
                    Json::Null
                }
            }
            Expression::Conditional(c) => match self.eval(&c.cond_expr) {
                Json::Bool(true) => self.eval(&c.true_expr),
                Json::Bool(false) => self.eval(&c.false_expr),
                _ => Json::Null,
            },
            Expression::Operation(op) => match op.as_ref() {
                Operation::Binary(b)
                    if matches!(b.operator, BinaryOperator::Eq | BinaryOperator::NotEq) =>
                {
                    let (lhs, rhs) = (self.eval(&b.lhs_expr), self.eval(&b.rhs_expr));
                    if lhs.is_null() || rhs.is_null() {
                        Json::Null
                    } else {
                        Json::from((lhs == rhs) == (b.operator == BinaryOperator::Eq))
                    }
                }
                _ => Json::Null,
            },
            Expression::Traversal(t) => match (&t.expr, &t.operators[..]) {
                (Expression::Variable(scope), [TraversalOperator::GetAttr(name), rest @ ..])
                    if matches!(scope.as_str(), "var" | "local") =>
                {
                    let mut value = self.get(scope.as_str(), name.as_str());
                    for op in rest {
                        value = match op {
                            TraversalOperator::GetAttr(attr) => value[attr.as_str()].clone(),
                            _ => Json::Null,
                        };
                    }
                    value
                }
                _ => Json::Null,
            },
            _ => Json::Null,
        }
    }
}

pub fn json_file(path: &str) -> Json {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The host's compose files: crawlfleet's, and Postgres and Redis beside it
/// (datastores = "host").
pub const COMPOSE_FILES: [&str; 2] = ["docker-compose.ec2.yaml", "docker-compose.datastores.yaml"];

/// A compose file as written (before interpolation).
pub fn compose_file(path: &str) -> serde_yaml::Value {
    serde_yaml::from_str(&read(path)).unwrap()
}

fn services(path: &str) -> Json {
    let mut doc = compose_file(path);
    doc.apply_merge().unwrap();
    serde_json::to_value(&doc["services"]).unwrap()
}

/// The services of docker-compose.ec2.yaml, anchors merged, as JSON.
pub fn compose() -> Json {
    services(COMPOSE_FILES[0])
}

/// The services of docker-compose.datastores.yaml (and what it adds to the others).
pub fn datastores_compose() -> Json {
    services(COMPOSE_FILES[1])
}

/// The instructions of the Dockerfile's last (runtime) stage: continuations joined,
/// comments dropped.
pub fn runtime_stage() -> Vec<String> {
    let dockerfile = read("Dockerfile");
    let mut instructions: Vec<String> = Vec::new();
    let mut continued = false;
    for line in dockerfile.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let part = line.trim_end_matches('\\').trim();
        match instructions.last_mut() {
            Some(last) if continued => {
                last.push(' ');
                last.push_str(part);
            }
            _ => instructions.push(part.to_owned()),
        }
        continued = line.ends_with('\\');
    }
    let last_from = instructions
        .iter()
        .rposition(|i| i.starts_with("FROM "))
        .expect("a FROM");
    instructions.split_off(last_from)
}

/// The names of an ECS container definition's `environment` (or `secrets`).
pub fn ecs_names(container: &Json, key: &str) -> Vec<String> {
    let mut names: Vec<String> = container[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key}: {container}"))
        .iter()
        .map(|e| text(&e["name"]))
        .collect();
    names.sort();
    names
}

/// An ECS container definition of `ecs/` as registered with the host's
/// datastores (Terraform's default): `ecs/host-datastores-secrets.json`'s
/// secrets for `key` (`worker` or `migrate`) added to `container`'s.
pub fn with_host_datastore_secrets(container: &Json, key: &str) -> Json {
    let added = json_file("ecs/host-datastores-secrets.json")[key].clone();
    let added = added
        .as_array()
        .unwrap_or_else(|| panic!("host-datastores-secrets.json: no {key}"))
        .clone();
    for secret in &added {
        assert!(
            text(&secret["valueFrom"]).ends_with(":parameter/crawlfleet/datastores-ca"),
            "{key}: {secret} is the host's CA parameter"
        );
    }
    let mut container = container.clone();
    let secrets = container["secrets"].as_array_mut().expect("secrets");
    secrets.extend(added);
    container
}

/// A `{name, value}` environment entry of an ECS container definition.
pub fn ecs_env(container: &Json, name: &str) -> String {
    let entries = container["environment"].as_array().expect("environment");
    let entry = entries
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name}"));
    text(&entry["value"])
}

/// The port of the URL at the end of a healthcheck command.
pub fn health_port(command: &Json) -> u64 {
    let command = command.as_array().expect("a healthcheck command");
    assert_eq!(
        command[1], "crawlfleet",
        "healthchecks run `crawlfleet healthcheck`"
    );
    url_port(&text(command.last().unwrap()))
}

/// The port of `scheme://host:port/...`.
pub fn url_port(url: &str) -> u64 {
    let port = url
        .rsplit(':')
        .next()
        .and_then(|p| p.split('/').next())
        .unwrap();
    port.parse().unwrap_or_else(|_| panic!("no port in {url}"))
}
