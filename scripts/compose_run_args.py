#!/usr/bin/env python3
"""The `podman run` arguments that run one service of a compose file the way
`docker compose up` would, so scripts/check-image runs the image with the compose
file's own settings instead of a copy of them.

    python3 scripts/compose_run_args.py [--file F] [--service NAME] [--env K=V ...]

Prints the arguments NUL-separated on stdout: the options, the image, then the
command (read them with `mapfile -d ''`). Says on stderr which
settings it left out and why. `${VAR}`, `${VAR:-default}`, `${VAR:?message}` and
`$$` are interpolated from the environment as compose does (in the settings it
applies: a variable only a left-out setting needs need not be set). `--env K=V` replaces
(or adds) a variable of the service's environment: what must differ on a
machine without the compose file's network (database and Redis URLs, say).

A setting it does not know makes it fail: a new setting in the compose file must be
taught here (applied, or left out with a reason), never silently dropped.
"""

import argparse
import json
import os
import re
import sys

import yaml

# Settings of a service that mean nothing for one container run on this machine,
# with the reason shown when one is left out.
LEFT_OUT = {
    "restart": "the check stops the container itself; a restart would hide a crash",
    "logging": "the check reads the container's output with `podman logs`",
    "depends_on": "the check starts what the service depends on itself",
    "env_file": "the deploy writes it on the host; the check passes its variables with --env",
    "ports": "the container shares the host's network",
    "networks": "the container shares the host's network",
    "network_mode": "the container shares the host's network",
}

# deploy: only what one container can apply.
DEPLOY_LEFT_OUT = {
    "replicas": "the check runs one container",
    "restart_policy": "the check stops the container itself",
    "update_config": "no rolling update here",
    "rollback_config": "no rolling update here",
}

VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


class ComposeError(Exception):
    pass


def interpolate(value, env):
    """Compose's variable substitution on one string."""

    def replace(match):
        if match["escaped"]:
            return "$"
        name = match["braced"] or match["bare"]
        op, arg = match["op"], match["arg"] or ""
        current = env.get(name)
        unset_or_empty = current is None or (op is not None and op.startswith(":") and current == "")
        if op in (":-", "-"):
            return arg if unset_or_empty else current
        if op in (":?", "?"):
            if unset_or_empty:
                raise ComposeError(f"{name} is required: {arg}")
            return current
        if op in (":+", "+"):
            return "" if unset_or_empty else arg
        return current or ""

    return VARIABLE.sub(replace, value)


def interpolate_all(node, env):
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [interpolate_all(item, env) for item in node]
    if isinstance(node, dict):
        return {key: interpolate_all(item, env) for key, item in node.items()}
    return node


def seconds(duration):
    """A compose duration ("45s", "1m30s", "500ms", or a number of seconds) in whole
    seconds, rounded up: podman's --stop-timeout takes seconds."""
    if isinstance(duration, (int, float)):
        return int(-(-duration // 1))
    total = 0.0
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ComposeError(f"not a duration: {duration!r}")
    for number, unit in parts:
        total += float(number) * {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6}[unit]
    return int(-(-total // 1))


def listed(value):
    return value if isinstance(value, list) else [value]


def environment(service):
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = {}
        for item in env:
            key, _, val = item.partition("=")
            pairs[key] = val
        return pairs
    return {key: "" if val is None else str(val) for key, val in env.items()}


def healthcheck_args(check):
    if check.get("disable"):
        return ["--no-healthcheck"]
    args = []
    test = check.get("test")
    if test is not None:
        if isinstance(test, str):
            test = ["CMD-SHELL", test]
        if test[0] == "NONE":
            return ["--no-healthcheck"]
        if test[0] == "CMD":
            # podman 4.3 reads an exec-form check as words after "CMD" (a JSON
            # array would become one word), so no word may hold a space.
            if any(not word or any(c.isspace() for c in word) for word in test[1:]):
                raise ComposeError(f"healthcheck test: an empty word or one with a space: {test}")
            args += ["--health-cmd", " ".join(test)]
        elif test[0] == "CMD-SHELL" and len(test) == 2:
            args += ["--health-cmd", json.dumps(test)]
        else:
            raise ComposeError(f"healthcheck test not understood: {test}")
    for key, flag in (
        ("interval", "--health-interval"),
        ("timeout", "--health-timeout"),
        ("start_period", "--health-start-period"),
        ("retries", "--health-retries"),
    ):
        if key in check:
            args += [flag, str(check[key])]
    unknown = set(check) - {"test", "interval", "timeout", "start_period", "retries", "disable"}
    if unknown:
        raise ComposeError(f"healthcheck settings not understood: {sorted(unknown)}")
    return args


def deploy_args(deploy, notes):
    args = []
    for key, value in deploy.items():
        if key in DEPLOY_LEFT_OUT:
            notes.append(f"deploy.{key}: {DEPLOY_LEFT_OUT[key]}")
        elif key == "resources":
            limits = value.get("limits") or {}
            for limit, limit_value in limits.items():
                if limit == "memory":
                    args += ["--memory", str(limit_value)]
                elif limit == "cpus":
                    args += ["--cpus", str(limit_value)]
                elif limit == "pids":
                    args += ["--pids-limit", str(limit_value)]
                else:
                    raise ComposeError(f"deploy.resources.limits.{limit} not understood")
            if value.get("reservations"):
                notes.append("deploy.resources.reservations: a scheduling hint, nothing to apply")
        else:
            raise ComposeError(f"deploy.{key} not understood")
    return args


def without_replaced(service, overrides):
    """The service without what will not be applied, so that its variables need not
    be set: the left-out settings and the replaced environment variables (their
    replacement is noted later, against the uninterpolated value)."""
    kept = {key: value for key, value in service.items() if key not in LEFT_OUT}
    kept.update({key: None for key in service if key in LEFT_OUT})
    env = service.get("environment")
    if isinstance(env, dict):
        kept["environment"] = {
            key: ("<replaced>" if key in overrides else value) for key, value in env.items()
        }
    elif isinstance(env, list):
        kept["environment"] = [
            f"{item.partition('=')[0]}=<replaced>" if item.partition("=")[0] in overrides else item
            for item in env
        ]
    return kept


def run_args(service, overrides, notes):
    """(options, image, command) for `podman run`."""
    service = dict(service)
    image = service.pop("image", None)
    if not image:
        raise ComposeError("the service names no image")
    command = listed(service.pop("command", []) or [])
    options = []

    env = environment(service)
    service.pop("environment", None)
    for key, value in overrides.items():
        if key in env:
            notes.append(f"environment {key}: replaced for this machine")
        env[key] = value
    for key, value in env.items():
        options += ["--env", f"{key}={value}"]

    for key, value in service.items():
        if key in LEFT_OUT:
            notes.append(f"{key}: {LEFT_OUT[key]}")
        elif key == "healthcheck":
            options += healthcheck_args(value)
        elif key == "deploy":
            options += deploy_args(value, notes)
        elif key == "entrypoint":
            options += ["--entrypoint", json.dumps(listed(value))]
        elif key == "user":
            options += ["--user", str(value)]
        elif key == "init":
            if value:
                options.append("--init")
        elif key == "stop_grace_period":
            options += ["--stop-timeout", str(seconds(value))]
        elif key == "stop_signal":
            options += ["--stop-signal", str(value)]
        elif key == "shm_size":
            options += ["--shm-size", str(value)]
        elif key == "tmpfs":
            for mount in listed(value):
                options += ["--tmpfs", mount]
        elif key == "read_only":
            if value:
                # Docker mounts nothing writable by itself; podman would add tmpfs
                # on /tmp, /run and /var/tmp unless told not to.
                options += ["--read-only", "--read-only-tmpfs=false"]
        elif key == "cap_drop":
            for cap in value:
                options += ["--cap-drop", cap]
        elif key == "cap_add":
            for cap in value:
                options += ["--cap-add", cap]
        elif key == "security_opt":
            for opt in value:
                options += ["--security-opt", opt]
        elif key in ("mem_limit", "memswap_limit", "pids_limit", "cpus"):
            flag = {"mem_limit": "--memory", "memswap_limit": "--memory-swap",
                    "pids_limit": "--pids-limit", "cpus": "--cpus"}[key]
            options += [flag, str(value)]
        elif key == "ulimits":
            for name, limit in value.items():
                if isinstance(limit, dict):
                    limit = f"{limit['soft']}:{limit['hard']}"
                options += ["--ulimit", f"{name}={limit}"]
        elif key == "working_dir":
            options += ["--workdir", str(value)]
        elif key == "hostname":
            options += ["--hostname", str(value)]
        elif key == "labels":
            pairs = value.items() if isinstance(value, dict) else (l.split("=", 1) for l in value)
            for name, label in pairs:
                options += ["--label", f"{name}={label}"]
        else:
            raise ComposeError(f"{key} not understood (teach scripts/compose_run_args.py)")
    return options, image, command


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", default="docker-compose.ec2.yaml")
    parser.add_argument("--service", default="worker")
    parser.add_argument("--env", action="append", default=[], metavar="K=V")
    args = parser.parse_args()

    overrides = {}
    for pair in args.env:
        key, sep, value = pair.partition("=")
        if not sep:
            parser.error(f"--env {pair}: expected K=V")
        overrides[key] = value
    try:
        with open(args.file, encoding="utf-8") as f:
            # SafeLoader resolves anchors and `<<` merge keys as compose does.
            document = yaml.safe_load(f)
        services = document.get("services") or {}
        if args.service not in services:
            raise ComposeError(f"no service {args.service} in {args.file}")
        service = without_replaced(services[args.service], overrides)
        service = interpolate_all(service, os.environ)
        notes = []
        options, image, command = run_args(service, overrides, notes)
    except ComposeError as e:
        print(f"error: {args.file}, service {args.service}: {e}", file=sys.stderr)
        return 1
    for note in notes:
        print(f"    left out or replaced: {note}", file=sys.stderr)
    sys.stdout.write("\0".join([*options, image, *command]) + "\0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
