//! The host's nightly backup is scripts/pg-backup's dump, where Terraform lets it
//! go and expires it, and docs/deploy.md restores it the way scripts/restore-drill
//! proves it restores.

use crate::sources::{Terraform, attr, first, nested, read, source};

const USER_DATA: &str = "infra/templates/user_data.sh.tftpl";

/// The `pg_dump ...` command of a script (the line that runs it), up to its
/// `--dbname`.
fn pg_dump(script: &str) -> &str {
    let line = script
        .lines()
        .find(|l| l.contains("pg_dump --") && l.contains(" --dbname"))
        .expect("a pg_dump command");
    let start = line.find("pg_dump --").unwrap();
    &line[start..line.find(" --dbname").unwrap()]
}

#[test]
fn the_host_dumps_postgres_as_scripts_pg_backup_does() {
    let backup = read("scripts/pg-backup");
    let host = read(USER_DATA);
    assert_eq!(
        pg_dump(&backup),
        "pg_dump --format=custom --compress=6 --no-owner --no-privileges"
    );
    assert_eq!(pg_dump(&host), pg_dump(&backup));
    // The same names, streamed the same way.
    let name = "name=\"$(date -u +%Y-%m-%dT%H%M%SZ).dump\"";
    assert!(backup.contains(name) && host.contains(name));
    let upload = "aws s3 cp --only-show-errors --expected-size 10737418240";
    assert!(backup.contains(upload) && host.contains(upload));
    assert!(host.contains("target=\"s3://${backup_bucket}/${pg_dump_prefix}/$name\""));
}

#[test]
fn the_dumps_go_where_the_role_may_write_and_the_lifecycle_expires() {
    let tf = Terraform::load();
    assert_eq!(tf.get("local", "pg_dump_prefix"), "pg_dump");
    let host = tf.resource("aws_launch_template", "host");
    assert!(source(attr(host, "user_data")).contains("pg_dump_prefix = local.pg_dump_prefix"));

    let lifecycle = tf.resource("aws_s3_bucket_lifecycle_configuration", "backups");
    let retention = nested(lifecycle, "rule")
        .find(|r| tf.eval(attr(r, "id")) == "pg-dump-retention")
        .expect("the dumps' retention rule");
    assert_eq!(
        source(attr(first(retention, "filter"), "prefix")),
        "\"${local.pg_dump_prefix}/\""
    );
    let policy = read("infra/iam.tf");
    assert!(policy.contains("\"${aws_s3_bucket.backups[0].arn}/${local.pg_dump_prefix}/*\""));
    assert!(
        !policy.contains("/pg_dump/"),
        "the prefix by its local, not a literal"
    );
}

#[test]
fn a_restore_is_the_one_scripts_restore_drill_proves() {
    let drill = read("scripts/restore-drill");
    let deploy = read("docs/deploy.md");
    let restore = deploy
        .split("## Restoring Postgres")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/deploy.md: Restoring Postgres");
    let flags = "pg_restore --exit-on-error --no-owner --no-privileges";
    assert!(drill.contains(flags), "scripts/restore-drill: {flags}");
    assert!(
        restore.contains(flags),
        "docs/deploy.md restores with {flags}"
    );
    assert!(restore.contains("scripts/restore-drill <time>.dump"));
    assert!(restore.contains("s3://$BUCKET/pg_dump/"));
}
