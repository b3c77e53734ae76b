//! The host dies alone and loses a minute at most: Postgres on a volume of its
//! own that Terraform never destroys, the host an auto-scaling group of one that
//! takes that volume and its name back, WAL archived by pgBackRest at least
//! every archive_timeout (what scripts/pitr-drill measures), and every
//! connection to the host's Postgres and Redis over TLS, checked against the
//! CA the host publishes.

use serde_json::Value as Json;

use crate::sources::{Terraform, attr, datastores_compose, first, read, source, text};

const USER_DATA: &str = "infra/templates/user_data.sh.tftpl";

/// A compose command as one string per argument.
fn command(service: &Json) -> Vec<String> {
    service["command"]
        .as_array()
        .unwrap_or_else(|| panic!("a command list: {service}"))
        .iter()
        .map(text)
        .collect()
}

/// Postgres's `-c name=value` settings in the compose file.
fn postgres_setting(name: &str) -> String {
    let args = command(&datastores_compose()["postgres"]);
    let prefix = format!("{name}=");
    args.iter()
        .filter_map(|a| a.strip_prefix(&prefix))
        .next_back()
        .unwrap_or_else(|| panic!("postgres is started without -c {name}=: {args:?}"))
        .to_owned()
}

/// Where a compose service mounts a host path ending with `host_end`.
fn mounted_at(service: &Json, host_end: &str) -> String {
    service["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .map(text)
        .find_map(|v| {
            // HOST:CONTAINER[:ro]; HOST may hold a ${VAR:?message} with colons.
            let v = v.strip_suffix(":ro").unwrap_or(&v).to_owned();
            let (host, container) = v.rsplit_once(':').unwrap();
            host.ends_with(host_end).then(|| container.to_owned())
        })
        .unwrap_or_else(|| panic!("{host_end} is not mounted: {service}"))
}

#[test]
fn the_hosts_postgres_serves_tls_alone_and_archives_every_minute_with_pgbackrest() {
    let compose = datastores_compose();
    let postgres = &compose["postgres"];
    assert_eq!(postgres_setting("ssl"), "on");
    let tls = mounted_at(postgres, "/tls");
    for file in ["ssl_cert_file", "ssl_key_file"] {
        assert!(
            postgres_setting(file).starts_with(&format!("{tls}/")),
            "{file} is in the mounted TLS folder {tls}"
        );
    }
    // Over TCP: TLS or nothing. Every line of the hba file that admits the
    // network is hostssl.
    assert_eq!(
        mounted_at(postgres, "./postgres-hba.conf"),
        postgres_setting("hba_file")
    );
    let hba = read("postgres-hba.conf");
    let rules: Vec<&str> = hba
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(!rules.is_empty());
    for rule in &rules {
        let kind = rule.split_whitespace().next().unwrap();
        assert!(
            matches!(kind, "local" | "hostssl"),
            "postgres-hba.conf admits {kind} connections: {rule}"
        );
    }
    assert!(
        rules
            .iter()
            .any(|r| r.starts_with("hostssl") && r.ends_with("scram-sha-256"))
    );

    // Every WAL segment to pgBackRest, a minute after its first write at most.
    assert_eq!(postgres_setting("archive_mode"), "on");
    let timeout: u64 = postgres_setting("archive_timeout").parse().unwrap();
    assert!((1..=60).contains(&timeout), "archive_timeout {timeout}");
    assert_eq!(
        postgres_setting("archive_command"),
        "pgbackrest --stanza=crawlfleet archive-push %p"
    );
    // The image archiving runs in has pgBackRest, built from the file the host
    // gets (infra/ssm.tf's host files).
    assert_eq!(postgres["build"]["dockerfile"], "postgres.Dockerfile");
    assert!(
        read("postgres.Dockerfile")
            .contains("apt-get install -y --no-install-recommends pgbackrest")
    );
    assert!(read("infra/ssm.tf").contains("\"pgbackrest.conf\", \"postgres.Dockerfile\""));
    let conf = read("pgbackrest.conf");
    assert!(
        conf.contains("\n[crawlfleet]\n"),
        "the stanza is in pgbackrest.conf"
    );
    assert_eq!(
        mounted_at(postgres, "./pgbackrest.conf"),
        "/etc/pgbackrest/pgbackrest.conf"
    );
    assert_eq!(
        mounted_at(postgres, "./pgbackrest"),
        "/etc/pgbackrest/conf.d"
    );
    // The repository is said apart (the host's conf.d, the drill's), never here.
    let settings: Vec<&str> = conf
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    assert!(
        !settings
            .iter()
            .any(|l| l.starts_with("repo1-type") || l.starts_with("repo1-path")),
        "{settings:?}"
    );
    let data = mounted_at(postgres, "/postgres");
    assert!(
        conf.contains(&format!("pg1-path={data}\n")),
        "pgBackRest's pg1-path is the data directory {data}"
    );
    // The drill measures these very settings.
    let drill = read("scripts/pitr-drill");
    assert!(drill.contains("grep -oE 'archive_timeout=[0-9]+' docker-compose.datastores.yaml"));
    assert!(drill.contains("cp pgbackrest.conf"));
    assert!(drill.contains("--stanza=crawlfleet"));
}

#[test]
fn the_hosts_redis_listens_on_its_tls_port_alone() {
    let redis = &datastores_compose()["redis"];
    let script = command(redis).join(" ");
    assert!(script.contains("--port 0 "), "no plaintext port: {script}");
    assert!(script.contains("--tls-port 6379 "), "{script}");
    let tls = mounted_at(redis, "/tls");
    for file in ["--tls-cert-file", "--tls-key-file", "--tls-ca-cert-file"] {
        assert!(
            script.contains(&format!("{file} {tls}/")),
            "{file} in {tls}: {script}"
        );
    }
    let health = redis["healthcheck"]["test"].to_string();
    assert!(health.contains("redis-cli --tls --cacert"), "{health}");
}

#[test]
fn every_client_of_the_hosts_datastores_checks_their_certificate() {
    let tf = Terraform::load();
    assert_eq!(
        tf.get("var", "datastores"),
        "host",
        "the default checked here"
    );
    // The Fargate worker and the migrate task: TLS asked for by name, the host's
    // CA as text from the parameter the host publishes.
    let worker = tf.get("local", "worker_container");
    let migrate = tf.get("local", "migrate_container");
    for (task, pems) in [
        (
            &worker,
            &["DATABASE_SSLROOTCERT_PEM", "REDIS_CA_CERT_PEM"][..],
        ),
        (&migrate, &["DATABASE_SSLROOTCERT_PEM"][..]),
    ] {
        let env = task["environment"].as_array().unwrap();
        let value = |name: &str| {
            env.iter()
                .find(|e| e["name"] == name)
                .map(|e| e["value"].clone())
                .unwrap_or(Json::Null)
        };
        assert_eq!(value("DATABASE_SSLMODE"), "verify-full", "{}", task["name"]);
        if task["name"] == "worker" {
            assert_eq!(value("REDIS_TLS"), "true");
        }
        let secrets = task["secrets"].as_array().unwrap();
        for pem in pems {
            assert!(
                secrets.iter().any(|s| s["name"] == *pem),
                "{} gets {pem}: {secrets:?}",
                task["name"]
            );
        }
    }
    let locals = read("infra/locals.tf");
    assert_eq!(
        locals
            .matches("valueFrom = aws_ssm_parameter.datastores_ca[0].arn")
            .count(),
        2
    );
    let iam = read("infra/iam.tf");
    assert!(
        iam.matches("[for p in aws_ssm_parameter.datastores_ca : p.arn]")
            .count()
            >= 2,
        "the host and the tasks' execution role may read the CA"
    );
    // The host's containers: the CA as a file, mounted, named for both.
    let compose = datastores_compose();
    for name in ["migrate", "api", "scheduler", "worker"] {
        let service = &compose[name];
        let ca = mounted_at(service, "/tls/ca.crt");
        assert_eq!(
            service["environment"]["DATABASE_SSLROOTCERT"],
            ca.as_str(),
            "{name}"
        );
        assert_eq!(
            service["environment"]["REDIS_CA_CERT"],
            ca.as_str(),
            "{name}"
        );
    }
    // The name the workers connect to is in the certificate the host makes, with
    // the compose names the host's containers use.
    let host_name = source(tf.expr("local", "datastores_host_name"));
    assert_eq!(host_name, "\"datastores.${local.datastores_zone}\"");
    let user_data = read(USER_DATA);
    assert!(
        user_data.contains("subjectAltName=DNS:%s,DNS:postgres,DNS:redis,IP:127.0.0.1")
            && user_data.contains("\"${datastores_host_name}\" > \"$work/extensions\""),
        "the certificate names the host, postgres and redis"
    );
    assert!(
        user_data.contains("--name \"${datastores_ca_parameter}\" --value \"file://$ca/ca.crt\"")
    );
}

#[test]
fn the_database_lives_on_a_volume_the_host_takes_back_when_it_is_replaced() {
    let tf = Terraform::load();
    let volume = tf.resource("aws_ebs_volume", "data");
    assert_eq!(tf.eval(attr(volume, "encrypted")), true);
    assert_eq!(
        source(attr(volume, "kms_key_id")),
        "aws_kms_key.crawlfleet.arn"
    );
    assert_eq!(
        tf.eval(attr(first(volume, "lifecycle"), "prevent_destroy")),
        true,
        "Terraform never destroys the data"
    );
    let tags = source(attr(volume, "tags"));
    assert!(
        tags.contains("(local.data_volume_tag) = var.name"),
        "{tags}"
    );
    assert!(
        tags.contains("Snapshot"),
        "the daily snapshots take it: {tags}"
    );
    assert_eq!(
        source(attr(volume, "availability_zone")),
        "aws_subnet.private[0].availability_zone"
    );

    // One host at a time, in the volume's AZ; the old one goes before the new.
    let group = tf.resource("aws_autoscaling_group", "host");
    for size in ["min_size", "max_size", "desired_capacity"] {
        assert_eq!(tf.eval(attr(group, size)), 1, "{size}");
    }
    let subnets: String = source(attr(group, "vpc_zone_identifier"))
        .split_whitespace()
        .collect();
    assert_eq!(subnets, "[aws_subnet.private[0].id]");
    let maintenance = first(group, "instance_maintenance_policy");
    assert_eq!(tf.eval(attr(maintenance, "max_healthy_percentage")), 100);
    assert_eq!(tf.eval(attr(group, "health_check_type")), "EC2");
    // The instance's own root volume holds nothing to keep.
    let template = tf.resource("aws_launch_template", "host");
    let root = first(first(template, "block_device_mappings"), "ebs");
    assert_eq!(tf.eval(attr(root, "delete_on_termination")), true);

    // The host finds the volume by the tag the role may attach, mounts it where
    // compose's DATA_DIR says, and points the workers' name at itself.
    let user_data_args = source(attr(template, "user_data"));
    for arg in [
        "data_volume_tag = local.data_volume_tag",
        "data_dir = local.data_dir",
        "datastores_host_name = local.datastores_host_name",
    ] {
        let squeezed: String = user_data_args
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(squeezed.contains(arg), "user data gets {arg}");
    }
    let user_data = read(USER_DATA);
    assert!(
        user_data.contains("--filters \"Name=tag:${data_volume_tag},Values=${data_volume_name}\"")
    );
    assert!(user_data.contains("aws ec2 attach-volume"));
    assert!(
        user_data.contains("if ((status == 2)); then") && user_data.contains("mkfs.ext4"),
        "formats a blank volume only"
    );
    assert!(user_data.contains("\"Name\\\": \\\"${datastores_host_name}\\\""));
    let iam = read("infra/iam.tf");
    assert!(iam.contains("variable = \"aws:ResourceTag/${local.data_volume_tag}\""));
    assert!(iam.contains("variable = \"aws:ResourceTag/aws:autoscaling:groupName\""));
    let ssm = read("infra/ssm.tf");
    assert!(ssm.contains("\"DATA_DIR=${local.data_dir}\""));
    assert!(source(tf.expr("local", "data_dir")).contains("/srv/"));
}
