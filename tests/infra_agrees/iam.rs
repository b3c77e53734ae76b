//! IAM: what the code calls is allowed, on our resources only.

use serde_json::{Value as Json, json};

use crate::sources::{Terraform, attr, code, json_file, nested, source, text};

#[test]
fn the_worker_task_role_may_protect_its_own_tasks_from_scale_in() {
    // src/worker/scale_in.rs asks the ECS agent for scale-in protection; the agent
    // calls UpdateTaskProtection with the task role's credentials.
    assert!(code().contains("/task-protection/v1/state"));
    let tf = Terraform::load();
    let protection = json!(["ecs:GetTaskProtection", "ecs:UpdateTaskProtection"]);

    let statements: Vec<_> =
        nested(tf.data("aws_iam_policy_document", "ecs_task"), "statement").collect();
    assert_eq!(statements.len(), 1);
    assert_eq!(tf.eval(attr(statements[0], "actions")), protection);
    assert_eq!(
        tf.eval(attr(statements[0], "resources")),
        json!([
            "arn:aws:ecs:${var.region}:${var.aws_account_id}:task/${aws_ecs_cluster.crawlfleet.name}/*"
        ]),
        "tasks of our cluster only"
    );
    let policy = tf.resource("aws_iam_role_policy", "ecs_task");
    assert_eq!(source(attr(policy, "role")), "aws_iam_role.ecs_task.id");
    assert_eq!(
        source(attr(
            tf.resource("aws_ecs_task_definition", "worker"),
            "task_role_arn"
        )),
        "aws_iam_role.ecs_task.arn"
    );

    // The AWS CLI path: the same policy, on the role the task definition names.
    let name = text(&tf.get("var", "name"));
    let document = json_file("ecs/task-role-policy.json");
    let statements = document["Statement"].as_array().unwrap();
    assert_eq!(statements.len(), 1);
    assert_eq!(statements[0]["Effect"], "Allow");
    assert_eq!(statements[0]["Action"], protection);
    assert_eq!(
        statements[0]["Resource"],
        format!("arn:aws:ecs:${{AWS_REGION}}:${{AWS_ACCOUNT_ID}}:task/{name}/*")
    );
    let task = json_file("ecs/task-definition.json");
    assert_eq!(
        task["taskRoleArn"],
        format!("arn:aws:iam::${{AWS_ACCOUNT_ID}}:role/{name}-worker-task")
    );
    assert_eq!(
        tf.eval(attr(tf.resource("aws_iam_role", "ecs_task"), "name")),
        Json::from("${var.name}-worker-task")
    );
}

#[test]
fn the_host_may_read_its_own_parameters_and_no_others() {
    let tf = Terraform::load();
    // A managed policy on the host's role would widen it: AmazonSSMManagedInstanceCore
    // allows ssm:GetParameter(s) on every parameter of the account.
    for attachment in tf.all("resource", "aws_iam_role_policy_attachment") {
        assert_ne!(source(attr(attachment, "role")), "aws_iam_role.ec2.name");
    }
    let mut reads = 0;
    for statement in nested(tf.data("aws_iam_policy_document", "ec2"), "statement") {
        let actions = tf.eval(attr(statement, "actions"));
        let resources = source(attr(statement, "resources"));
        let actions: Vec<String> = actions.as_array().unwrap().iter().map(text).collect();
        assert!(
            actions.iter().all(|a| !a.ends_with(":*") && a != "*"),
            "{actions:?}: name the actions"
        );
        if actions.iter().any(|a| a.starts_with("ssm:GetParameter")) {
            reads += 1;
            assert!(
                !resources.contains("\"*\""),
                "parameter reads on {resources}"
            );
            assert!(resources.contains("aws_ssm_parameter."), "{resources}");
        }
    }
    assert_eq!(reads, 1, "one statement reads the host's parameters");
}
