//! .env.example lists every variable, also those only docker compose and the image
//! read (the crawlfleet settings are checked by src/config.rs's own test).

use std::collections::BTreeSet;

use crate::sources::{COMPOSE_FILES, compose_file, env_example_names, runtime_stage};

/// The variables docker compose interpolates in `value`: `$NAME`, `${NAME}`,
/// `${NAME:-default}`, `${NAME:?error}`...; `$$` is a literal `$`.
fn interpolated(value: &str, out: &mut BTreeSet<String>) {
    let bytes = value.as_bytes();
    let is_name = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            i += 1;
            continue;
        }
        match bytes.get(i + 1) {
            Some(b'$') => i += 2,
            Some(&next) if next == b'{' || is_name(next) => {
                let start = if next == b'{' { i + 2 } else { i + 1 };
                let end = (start..bytes.len())
                    .find(|&j| !is_name(bytes[j]))
                    .unwrap_or(bytes.len());
                out.insert(value[start..end].to_owned());
                i = end;
            }
            _ => i += 1,
        }
    }
}

/// Every string in the YAML document, keys and values.
fn strings(value: &serde_yaml::Value, out: &mut Vec<String>) {
    match value {
        serde_yaml::Value::String(s) => out.push(s.clone()),
        serde_yaml::Value::Sequence(items) => items.iter().for_each(|v| strings(v, out)),
        serde_yaml::Value::Mapping(map) => map.iter().for_each(|(k, v)| {
            strings(k, out);
            strings(v, out);
        }),
        serde_yaml::Value::Tagged(tagged) => strings(&tagged.value, out),
        _ => {}
    }
}

#[test]
fn interpolation_is_read_as_docker_compose_reads_it() {
    let mut found = BTreeSet::new();
    interpolated(
        "a $${ESCAPED} $$ALSO ${BRACED:-x} ${NESTED:-${INNER}} $BARE/x ${Q:?e}",
        &mut found,
    );
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        ["BARE", "BRACED", "INNER", "NESTED", "Q"]
    );
}

/// Every name in `found` is listed in .env.example; `sample` proves the names were
/// found at all.
fn assert_documented(what: &str, found: &BTreeSet<String>, sample: &str) {
    assert!(
        found.contains(sample),
        "{what}: no {sample} among {found:?}"
    );
    let documented = env_example_names();
    let missing: Vec<_> = found.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "{what} reads {missing:?}, missing from .env.example"
    );
}

#[test]
fn every_variable_compose_and_the_image_read_is_in_env_example() {
    for (file, sample) in COMPOSE_FILES
        .iter()
        .zip(["CRAWLFLEET_IMAGE", "PRIVATE_BIND_IP"])
    {
        let mut texts = Vec::new();
        strings(&compose_file(file), &mut texts);
        let mut compose = BTreeSet::new();
        for text in &texts {
            interpolated(text, &mut compose);
        }
        assert_documented(file, &compose, sample);
    }

    // The runtime image's ENV: its defaults, which an operator may override.
    let image: BTreeSet<String> = runtime_stage()
        .iter()
        .filter_map(|i| i.strip_prefix("ENV "))
        .flat_map(str::split_whitespace)
        .filter_map(|assignment| Some(assignment.split_once('=')?.0.to_owned()))
        .collect();
    assert_documented("the Dockerfile's runtime stage", &image, "HEALTHCHECK_URL");
}
