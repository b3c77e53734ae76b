#!/usr/bin/env python3
"""Validate ecs/*.json against botocore's service models (run by scripts/check-infra).

Each document is what an AWS CLI call of docs/deploy.md takes (`--cli-input-json`)
after envsubst fills its ${PLACEHOLDERS}. botocore's validator catches misspelled
keys, wrong types and missing required fields, offline.

    python3 scripts/check_ecs_json.py [ECS_DIR]
"""

import json
import re
import sys
from pathlib import Path

import botocore.session
from botocore.exceptions import ParamValidationError
from botocore.validate import validate_parameters

# Every placeholder the files may use, with a value of the right shape.
PLACEHOLDERS = {
    "AWS_ACCOUNT_ID": "123456789012",
    "AWS_REGION": "ap-northeast-2",
    "IMAGE_TAG": "0123abc",
    "PRIVATE_SUBNET_1": "subnet-0123456789abcdef0",
    "PRIVATE_SUBNET_2": "subnet-0123456789abcdef1",
    "WORKERS_SECURITY_GROUP": "sg-0123456789abcdef0",
    "CLOUDWATCH_NAMESPACE": "CrawlerService",
    "CLUSTER_NAME": "crawlfleet",
    "SERVICE_NAME": "crawlfleet-worker",
    "HOST_GROUP_NAME": "crawlfleet-host",
    "DATABASE_HOST": "crawlfleet.abcdefghijkl.ap-northeast-2.rds.amazonaws.com",
    "DATABASE_SSLMODE": "verify-full",
    "REDIS_HOST": "master.crawlfleet.abcdef.apn2.cache.amazonaws.com",
    "REDIS_TLS": "true",
}
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

session = botocore.session.get_session()
failures = []


def load(path):
    """The file as the CLI would get it after envsubst; unknown placeholders fail."""
    text = path.read_text()
    unknown = sorted(set(PLACEHOLDER.findall(text)) - PLACEHOLDERS.keys())
    if unknown:
        failures.append(f"{path}: unknown placeholders {unknown} (add them to {__file__} and docs/deploy.md)")
    return json.loads(PLACEHOLDER.sub(lambda m: PLACEHOLDERS.get(m.group(1), "x"), text))


def check(label, service, operation, params):
    shape = session.get_service_model(service).operation_model(operation).input_shape
    try:
        validate_parameters(params, shape)
        print(f"    ok    {label}: {service} {operation}")
    except ParamValidationError as error:
        failures.append(f"{label} is not a valid {service} {operation} input:\n{error}")


def main():
    ecs = Path(sys.argv[1] if len(sys.argv) > 1 else "ecs")

    check("task-definition.json", "ecs", "RegisterTaskDefinition", load(ecs / "task-definition.json"))
    check("service.json", "ecs", "CreateService", load(ecs / "service.json"))
    check("migrate-task-definition.json", "ecs", "RegisterTaskDefinition",
          load(ecs / "migrate-task-definition.json"))
    check("run-migrate.json", "ecs", "RunTask", load(ecs / "run-migrate.json"))

    # With the host's datastores the task definitions get the host's CA as
    # secrets too: still valid inputs, every added name new to its container.
    host = load(ecs / "host-datastores-secrets.json")
    for key, file in [("worker", "task-definition.json"), ("migrate", "migrate-task-definition.json")]:
        definition = load(ecs / file)
        container = definition["containerDefinitions"][0]
        present = {secret["name"] for secret in container.get("secrets", [])}
        added = host.get(key) or []
        if not added:
            failures.append(f"host-datastores-secrets.json: no secrets for {key}")
        for secret in added:
            if secret["name"] in present:
                failures.append(f"host-datastores-secrets.json: {file} has {secret['name']} already")
            if not secret["valueFrom"].endswith(":parameter/crawlfleet/datastores-ca"):
                failures.append(f"host-datastores-secrets.json: {secret['name']} not from datastores-ca")
        container["secrets"] = container.get("secrets", []) + added
        check(f"{file} with host-datastores-secrets.json {key}", "ecs", "RegisterTaskDefinition", definition)

    # PutRolePolicy takes the document as a string; check it is a policy.
    policy = load(ecs / "task-role-policy.json")
    check("task-role-policy.json", "iam", "PutRolePolicy",
          {"RoleName": "crawlfleet-worker-task", "PolicyName": "crawlfleet-worker-task-protection",
           "PolicyDocument": json.dumps(policy)})
    if policy.get("Version") != "2012-10-17" or not policy.get("Statement"):
        failures.append("task-role-policy.json: needs Version 2012-10-17 and statements")

    scaling = load(ecs / "autoscaling.json")
    scaling.pop("_comment", None)
    check("autoscaling.json registerScalableTarget", "application-autoscaling",
          "RegisterScalableTarget", scaling["registerScalableTarget"])
    for step in scaling["stepScaling"]:
        name = step["policy"]["PolicyName"]
        check(f"autoscaling.json {name} policy", "application-autoscaling", "PutScalingPolicy", step["policy"])
        check(f"autoscaling.json {name} alarm", "cloudwatch", "PutMetricAlarm", step["alarm"])
    check("autoscaling.json targetTracking", "application-autoscaling",
          "PutScalingPolicy", scaling["targetTracking"])
    check("autoscaling.json scaleFromZero policy", "application-autoscaling",
          "PutScalingPolicy", scaling["scaleFromZero"]["policy"])
    check("autoscaling.json scaleFromZero alarm", "cloudwatch",
          "PutMetricAlarm", scaling["scaleFromZero"]["alarm"])
    check("autoscaling.json targetTrackingScaleToZero policy", "application-autoscaling",
          "PutScalingPolicy", scaling["targetTrackingScaleToZero"]["policy"])
    check("autoscaling.json targetTrackingScaleToZero alarm", "cloudwatch",
          "PutMetricAlarm", scaling["targetTrackingScaleToZero"]["alarm"])

    # PutDashboard takes the body as a string; check it is JSON with widgets.
    dashboard = load(ecs / "dashboard.json")
    check("dashboard.json", "cloudwatch", "PutDashboard",
          {"DashboardName": "CrawlerMonitoring", "DashboardBody": json.dumps(dashboard)})
    for index, widget in enumerate(dashboard.get("widgets", [])):
        if not {"type", "properties"} <= widget.keys():
            failures.append(f"dashboard.json widget {index}: needs type and properties")
    if not dashboard.get("widgets"):
        failures.append("dashboard.json: no widgets")

    for failure in failures:
        print(f"error: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
