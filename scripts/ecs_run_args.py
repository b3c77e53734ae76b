#!/usr/bin/env python3
"""The `podman run` arguments that run the container of an ECS task definition the
way Fargate runs it, so scripts/check-image runs the image with the task
definition's own settings instead of a copy of them.

    python3 scripts/ecs_run_args.py --image IMAGE [--file F] [--container NAME] [--env K=V ...]

Prints the arguments NUL-separated on stdout: the options, the image, then the
command (read them with `mapfile -d ''`). Says on stderr which settings it left out
and why. Environment values holding a ${PLACEHOLDER} (what envsubst fills per
account) are left out; `--env K=V` replaces (or adds) a variable: what must differ
on a machine without the account (the datastores, say).

The task's volumes are Fargate's ephemeral storage: a fresh, empty volume per task
that starts with what the image holds at the mount path, owner and mode included.
An anonymous podman volume does the same (copy-up), and goes with the container
(`podman rm --volumes`). Nothing else is writable: --read-only without podman's
own tmpfs mounts.

A setting it does not know makes it fail: a new setting in the task definition
must be taught here (applied, or left out with a reason), never silently dropped.
"""

import argparse
import json
import re
import sys

PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")

# Container settings that mean nothing for one container run on this machine.
LEFT_OUT = {
    "name": "one container: its name is the check's",
    "essential": "one container: it is the task",
    "image": "the check runs the image it built (--image)",
    "secrets": "Parameter Store is the account's; the check passes its own datastores with --env",
    "portMappings": "the container shares the host's network",
    "logConfiguration": "the check reads the container's output with `podman logs`",
}
TASK_LEFT_OUT = {
    "family": "a name",
    "requiresCompatibilities": "Fargate's",
    "networkMode": "the container shares the host's network",
    "runtimePlatform": "this machine's",
    "executionRoleArn": "no AWS here",
    "taskRoleArn": "no AWS here",
    "containerDefinitions": "read below",
    "volumes": "read with the mount points",
}


class TaskDefinitionError(Exception):
    pass


def left_out(setting, reason):
    print(f"    left out: {setting}: {reason}", file=sys.stderr)


def health_args(check):
    known = {"command", "interval", "timeout", "retries", "startPeriod"}
    unknown = sorted(set(check) - known)
    if unknown:
        raise TaskDefinitionError(f"healthCheck: settings not taught to {__file__}: {unknown}")
    command = check["command"]
    if command[0] == "CMD":
        # podman 4.3 reads an exec-form check as words after "CMD" (a JSON array
        # would become one word), so no word may hold a space (as compose_run_args.py).
        if any(not word or any(c.isspace() for c in word) for word in command[1:]):
            raise TaskDefinitionError(f"healthCheck.command: an empty word or one with a space: {command}")
        test = " ".join(command)
    elif command[0] == "CMD-SHELL" and len(command) == 2:
        test = json.dumps(command)
    else:
        raise TaskDefinitionError(f"healthCheck.command must start with CMD or CMD-SHELL: {command}")
    args = [f"--health-cmd={test}"]
    for key, flag in [("interval", "interval"), ("timeout", "timeout"), ("startPeriod", "start-period")]:
        if key in check:
            args.append(f"--health-{flag}={check[key]}s")
    if "retries" in check:
        args.append(f"--health-retries={check['retries']}")
    return args


def linux_args(parameters):
    args = []
    for key, value in parameters.items():
        if key == "capabilities":
            unknown = sorted(set(value) - {"drop", "add"})
            if unknown:
                raise TaskDefinitionError(f"linuxParameters.capabilities: not taught: {unknown}")
            args += [f"--cap-drop={cap}" for cap in value.get("drop", [])]
            args += [f"--cap-add={cap}" for cap in value.get("add", [])]
        elif key == "initProcessEnabled":
            args.append(f"--init={'true' if value else 'false'}")
        else:
            raise TaskDefinitionError(f"linuxParameters.{key}: not taught to {__file__}")
    return args


def mount_args(mount_points, volumes):
    by_name = {}
    for volume in volumes:
        extra = sorted(set(volume) - {"name"})
        if extra:
            raise TaskDefinitionError(
                f"volume {volume.get('name')}: {extra}: only the task's ephemeral storage is taught"
            )
        by_name[volume["name"]] = volume
    args = []
    for mount in mount_points:
        source = mount["sourceVolume"]
        if source not in by_name:
            raise TaskDefinitionError(f"mountPoints: {source} is not a volume of the task")
        option = f"type=volume,destination={mount['containerPath']}"
        if mount.get("readOnly", False):
            option += ",ro=true"
        args.append(f"--mount={option}")
    return args


def run_args(task, container_name, image, replacements):
    for key in task:
        if key not in TASK_LEFT_OUT and key not in ("cpu", "memory"):
            raise TaskDefinitionError(f"task setting {key}: not taught to {__file__}")
    containers = [c for c in task["containerDefinitions"] if c["name"] == container_name]
    if len(containers) != 1:
        raise TaskDefinitionError(f"no container {container_name} in the task definition")
    container = containers[0]
    args = []
    if "memory" in task:
        args.append(f"--memory={int(task['memory'])}m")
    if "cpu" in task:
        args.append(f"--cpus={int(task['cpu']) / 1024:g}")
    environment = {}
    for key, value in container.items():
        if key in LEFT_OUT:
            left_out(key, LEFT_OUT[key])
        elif key == "command":
            pass
        elif key == "readonlyRootFilesystem":
            # Without podman's own /tmp, /var/tmp and /run: only the task's volumes.
            args += [f"--read-only={'true' if value else 'false'}", "--read-only-tmpfs=false"]
        elif key == "user":
            args.append(f"--user={value}")
        elif key == "stopTimeout":
            args.append(f"--stop-timeout={value}")
        elif key == "linuxParameters":
            args += linux_args(value)
        elif key == "mountPoints":
            args += mount_args(value, task.get("volumes", []))
        elif key == "healthCheck":
            args += health_args(value)
        elif key == "environment":
            for pair in value:
                if PLACEHOLDER.search(pair["value"]):
                    left_out(f"environment {pair['name']}", "a per-account ${PLACEHOLDER}")
                else:
                    environment[pair["name"]] = pair["value"]
        else:
            raise TaskDefinitionError(f"container setting {key}: not taught to {__file__}")
    for key, value in replacements.items():
        if key in environment:
            left_out(f"environment {key}", "replaced by --env")
        environment[key] = value
    for key in sorted(environment):
        args.append(f"--env={key}={environment[key]}")
    return args + [image] + list(container.get("command", []))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", default="ecs/task-definition.json")
    parser.add_argument("--container", default="worker")
    parser.add_argument("--image", required=True)
    parser.add_argument("--env", action="append", default=[], metavar="K=V")
    options = parser.parse_args()
    replacements = {}
    for pair in options.env:
        key, sep, value = pair.partition("=")
        if not sep:
            parser.error(f"--env {pair}: expected K=V")
        replacements[key] = value
    with open(options.file) as file:
        task = json.load(file)
    try:
        args = run_args(task, options.container, options.image, replacements)
    except TaskDefinitionError as error:
        print(f"{options.file}: {error}", file=sys.stderr)
        sys.exit(1)
    sys.stdout.write("\0".join(args) + "\0")


if __name__ == "__main__":
    main()
