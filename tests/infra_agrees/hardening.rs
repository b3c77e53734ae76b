//! Every crawlfleet container runs hardened the same way wherever it runs: the
//! Fargate worker (Terraform and the ECS JSON), the host's api, scheduler,
//! migrate and base workers (compose), and Redis on the host without root.

use std::collections::BTreeSet;

use serde_json::{Value as Json, json};

use crate::sources::{
    Terraform, attr, compose, datastores_compose, json_file, nested, read, source, text,
};

/// The image's user (the Dockerfile's USER), said again by every container.
const UID: &str = "10001";

/// The paths a compose service's tmpfs entries mount.
fn tmpfs_paths(service: &Json) -> BTreeSet<String> {
    service["tmpfs"]
        .as_array()
        .unwrap_or_else(|| panic!("no tmpfs: {service}"))
        .iter()
        .map(|entry| text(entry).split(':').next().unwrap().to_string())
        .collect()
}

#[test]
fn the_fargate_worker_writes_only_its_ephemeral_volumes_as_uid_10001_without_capabilities() {
    let tf = Terraform::load();
    let tf_worker = tf.get("local", "worker_container");
    let task = json_file("ecs/task-definition.json");
    let worker = &task["containerDefinitions"][0];

    for container in [&tf_worker, worker] {
        assert_eq!(
            container["readonlyRootFilesystem"],
            json!(true),
            "{container}"
        );
        assert_eq!(container["user"], json!(UID));
        assert_eq!(
            container["linuxParameters"]["capabilities"]["drop"],
            json!(["ALL"])
        );
        assert!(container["linuxParameters"]["capabilities"]["add"].is_null());
        assert!(container["privileged"].is_null() || container["privileged"] == json!(false));
    }
    assert_eq!(tf_worker["mountPoints"], worker["mountPoints"]);
    // The migrate task too: it writes nothing at all.
    let tf_migrate = tf.get("local", "migrate_container");
    let json_migrate = &json_file("ecs/migrate-task-definition.json")["containerDefinitions"][0];
    for container in [&tf_migrate, json_migrate] {
        assert_eq!(
            container["readonlyRootFilesystem"],
            json!(true),
            "{container}"
        );
        assert_eq!(container["user"], json!(UID));
        assert_eq!(
            container["linuxParameters"]["capabilities"]["drop"],
            json!(["ALL"])
        );
        assert!(container["mountPoints"].is_null());
    }

    // Where it writes is where the compose file's base worker has its tmpfs: Chrome's
    // profiles in /tmp, its settings and caches in the home folder.
    let mounted: BTreeSet<String> = worker["mountPoints"]
        .as_array()
        .expect("mountPoints")
        .iter()
        .map(|m| {
            assert_eq!(m["readOnly"], json!(false));
            text(&m["containerPath"])
        })
        .collect();
    assert_eq!(mounted, tmpfs_paths(&compose()["worker"]));

    // Each mount point names a volume of the task, and each volume is the task's
    // ephemeral storage (no host path, no EFS).
    let sources: BTreeSet<String> = worker["mountPoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| text(&m["sourceVolume"]))
        .collect();
    let json_volumes: BTreeSet<String> = task["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .map(|v| {
            assert_eq!(
                v.as_object().unwrap().len(),
                1,
                "ephemeral: a name only, {v}"
            );
            text(&v["name"])
        })
        .collect();
    assert_eq!(json_volumes, sources);
    let definition = tf.resource("aws_ecs_task_definition", "worker");
    let tf_volumes: BTreeSet<String> = nested(definition, "volume")
        .map(|v| {
            assert!(v.blocks().next().is_none(), "ephemeral: a name only");
            source(attr(v, "name")).trim_matches('"').to_string()
        })
        .collect();
    assert_eq!(tf_volumes, sources);
}

#[test]
fn the_hosts_crawlfleet_containers_are_read_only_non_root_and_without_capabilities() {
    let services = compose();
    for name in ["migrate", "api", "scheduler", "worker"] {
        let service = &services[name];
        assert_eq!(service["user"], json!(format!("{UID}:{UID}")), "{name}");
        assert_eq!(service["read_only"], json!(true), "{name}");
        assert_eq!(service["cap_drop"], json!(["ALL"]), "{name}");
        assert!(service["cap_add"].is_null(), "{name}");
        assert_eq!(
            service["security_opt"],
            json!(["no-new-privileges:true"]),
            "{name}"
        );
        assert!(
            tmpfs_paths(service).contains("/tmp"),
            "{name}: /tmp in memory"
        );
    }
}

#[test]
fn redis_on_the_host_runs_as_the_images_redis_user_without_capabilities() {
    let redis = &datastores_compose()["redis"];
    // 999: the redis user of the official image, the owner crawlfleet-deploy and
    // crawlfleet-datastores-tls give its password and key to.
    assert_eq!(redis["user"], json!("999:999"));
    assert_eq!(redis["cap_drop"], json!(["ALL"]));
    assert_eq!(redis["security_opt"], json!(["no-new-privileges:true"]));
    let user_data = read("infra/templates/user_data.sh.tftpl");
    assert!(
        user_data.contains("chown 999:999 datastores/redis-password.new"),
        "the password file is readable by Redis's user"
    );
}
