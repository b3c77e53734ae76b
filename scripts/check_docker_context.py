#!/usr/bin/env python3
"""Would `docker build` get past cargo's manifest? Checked without Docker (run by
scripts/check-infra).

Assembles in a temporary directory exactly what the build stage of a Dockerfile
COPYs from the build context (its COPY/ADD lines, with .dockerignore applied the way
BuildKit applies it), then asks cargo about the manifest there, in the stage's
WORKDIR, the way the stage's `cargo build` would see it:

  cargo fetch --locked --target x86_64-unknown-linux-gnu
      parses the whole manifest, every declared target included (a [[bench]] whose
      file was not copied is refused here), and checks Cargo.lock against it, as
      `cargo build --locked` does. It downloads only crates missing from the local
      cache (from crates.io, as the image build would).
  cargo metadata --offline --no-deps --format-version 1
      the targets cargo sees: every `--bin NAME` of the stage's cargo command must
      be one. (metadata alone is not enough: it quietly drops a declared target
      whose file is missing.)

    python3 scripts/check_docker_context.py [--context DIR] [--stage NAME] [DOCKERFILE]

Defaults: context `.`, Dockerfile `<context>/Dockerfile`, stage: the one whose RUN
calls cargo. Exits 1, saying why, when the image could not build.
"""

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath

# The image runs on Fargate X86_64 (ecs/task-definition.json) and is built with
# --platform linux/amd64 (docs/deploy.md): the crates that build needs.
TARGET_TRIPLE = "x86_64-unknown-linux-gnu"
GLOB_CHARS = re.compile(r"[*?\[]")


class BuildWouldFail(Exception):
    """What `docker build` would stop on, in words."""


# --- Dockerfile ----------------------------------------------------------------------


def instructions(dockerfile):
    """(line number, KEYWORD, arguments) of each instruction; continuations joined,
    comments dropped."""
    result, parts, start = [], [], None
    for number, line in enumerate(dockerfile.read_text().splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#") or (not stripped and not parts):
            continue
        if start is None:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1])
            continue
        parts.append(stripped)
        keyword, _, arguments = " ".join(parts).strip().partition(" ")
        result.append((start, keyword.upper(), arguments.strip()))
        parts, start = [], None
    return result


class Stage:
    def __init__(self, name, base=None):
        self.name = name
        self.workdir = base.workdir if base else PurePosixPath("/")
        # (line, sources, destination, workdir at that line) from the context.
        self.copies = list(base.copies) if base else []
        self.cargo_runs = []  # (line, command, workdir)


def stages(dockerfile):
    """Every stage, in order; a stage built FROM an earlier one starts with what that
    one copied."""
    found = []
    by_name = {}
    current = None
    for line, keyword, arguments in instructions(dockerfile):
        if keyword == "FROM":
            words = [w for w in arguments.split() if not w.startswith("--")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(found))
            current = Stage(name, by_name.get(words[0]))
            found.append(current)
            by_name[name] = current
        elif current is None:
            continue  # ARG before the first FROM
        elif keyword == "WORKDIR":
            current.workdir = current.workdir / arguments.strip('"')
        elif keyword in ("COPY", "ADD"):
            copy = parse_copy(line, keyword, arguments)
            if copy is not None:
                current.copies.append((line, copy[0], copy[1], current.workdir))
        elif keyword == "RUN" and re.search(r"(^|[\s;&|(])cargo\s", arguments):
            current.cargo_runs.append((line, arguments, current.workdir))
    return found


def parse_copy(line, keyword, arguments):
    """(sources, destination) of a COPY/ADD from the build context; None when it
    copies from another stage or image."""
    words = arguments.split()
    flags = []
    while words and words[0].startswith("--"):
        flags.append(words.pop(0))
    for flag in flags:
        name = flag[2:].split("=", 1)[0]
        if name == "from":
            return None
        if name not in ("chown", "chmod", "link"):
            raise BuildWouldFail(f"line {line}: {keyword} {flag} is not understood by this check")
    rest = " ".join(words)
    if rest.startswith("["):
        paths = json.loads(rest)
    elif "<<" in rest:
        raise BuildWouldFail(f"line {line}: {keyword} with a heredoc is not understood by this check")
    else:
        paths = words
    if len(paths) < 2:
        raise BuildWouldFail(f"line {line}: {keyword} needs a source and a destination")
    if any("$" in p for p in paths):
        raise BuildWouldFail(f"line {line}: {keyword} with variables is not understood by this check")
    sources = [s for s in paths[:-1] if not (keyword == "ADD" and re.match(r"^[a-z]+://", s))]
    return sources, paths[-1]


# --- .dockerignore ---------------------------------------------------------------------


class DockerIgnore:
    """The rules of moby's patternmatcher: one pattern per line, `!` re-includes, the
    last matching pattern decides, and a pattern that matches a directory matches
    everything below it."""

    def __init__(self, path):
        self.patterns = []
        self.name = path.name if path.is_file() else "no .dockerignore"
        lines = path.read_text().splitlines() if path.is_file() else []
        for line in lines:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            exclusion = line.startswith("!")
            pattern = os.path.normpath(line[1:].strip() if exclusion else line).lstrip("/")
            self.patterns.append((exclusion, re.compile(self._regex(pattern))))

    @staticmethod
    def _regex(pattern):
        out, i = "^", 0
        while i < len(pattern):
            c = pattern[i]
            if pattern.startswith("**", i):
                i += 2
                if pattern.startswith("/", i):
                    i += 1
                    out += "(.*/)?"
                else:
                    out += ".*"
                continue
            if c == "*":
                out += "[^/]*"
            elif c == "?":
                out += "[^/]"
            elif c == "[":
                end = pattern.find("]", i)
                if end < 0:
                    out += re.escape(c)
                else:
                    out += "[" + pattern[i + 1 : end].replace("^", "\\^", 1).replace("!", "^", 1) + "]"
                    i = end
            else:
                out += re.escape(c)
            i += 1
        return out + "$"

    def excluded(self, relative):
        parts = PurePosixPath(relative).parts
        candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
        matched = False
        for exclusion, regex in self.patterns:
            if exclusion != matched:
                continue  # cannot change the outcome
            if any(regex.match(c) for c in candidates):
                matched = not exclusion
        return matched


def ignore_file(context, dockerfile):
    """BuildKit reads <Dockerfile>.dockerignore next to the Dockerfile, when there is
    one, instead of the context's .dockerignore."""
    own = dockerfile.with_name(dockerfile.name + ".dockerignore")
    return own if own.is_file() else context / ".dockerignore"


# --- assembling the stage's files ---------------------------------------------------------


def context_matches(context, source):
    """Context paths a COPY source names (Go filepath.Match globbing per segment)."""
    source = os.path.normpath(source).lstrip("/")
    if source in ("", "."):
        return [""]
    if not GLOB_CHARS.search(source):
        return [source] if (context / source).exists() else []
    matches = [""]
    for segment in PurePosixPath(source).parts:
        next_matches = []
        for prefix in matches:
            directory = context / prefix
            if not directory.is_dir():
                continue
            for entry in sorted(os.listdir(directory)):
                if fnmatch.fnmatchcase(entry, segment):
                    next_matches.append(f"{prefix}/{entry}".lstrip("/"))
        matches = next_matches
    return matches


def files_below(context, relative, ignore):
    """The files a context path stands for, as (path in the context, path below the
    copied directory), without what .dockerignore leaves out of the context."""
    path = context / relative
    if path.is_file():
        return [] if ignore.excluded(relative) else [(relative, PurePosixPath(relative).name)]
    found = []
    for directory, subdirs, files in os.walk(path):
        subdirs.sort()
        for name in sorted(files):
            full = Path(directory, name)
            in_context = full.relative_to(context).as_posix()
            if not ignore.excluded(in_context):
                found.append((in_context, full.relative_to(path).as_posix()))
    return found


def assemble(context, stage, ignore, root):
    """Copy into ROOT (the stage's filesystem) what the stage's COPY lines take from
    the context; report each line."""
    for line, sources, destination, workdir in stage.copies:
        target = workdir / destination  # an absolute destination replaces workdir
        # A WORKDIR exists as a directory: `COPY file .` puts the file into it.
        into_directory = destination.endswith("/") or target == workdir or len(sources) > 1
        copied = 0
        for source in sources:
            matches = context_matches(context, source)
            into_directory = into_directory or len(matches) > 1
            files = [
                (in_context, below, (context / match).is_dir())
                for match in matches
                for in_context, below in files_below(context, match, ignore)
            ]
            if not files:
                raise BuildWouldFail(
                    f"line {line}: COPY {source}: not in the build context, or all of it is "
                    f"excluded by {ignore.name}"
                )
            for in_context, below, from_directory in files:
                # A directory's contents go into the destination; a file goes into it
                # or becomes it.
                path = target / below if from_directory or into_directory else target
                copy = root / str(path).lstrip("/")
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(context / in_context, copy)
                copied += 1
        print(f"    line {line}: COPY {' '.join(sources)} -> {target}: {copied} files")


# --- cargo ------------------------------------------------------------------------------------


def cargo(arguments, directory):
    try:
        return subprocess.run(["cargo", *arguments], cwd=directory, capture_output=True, text=True)
    except FileNotFoundError:
        raise BuildWouldFail("cargo is not on PATH: this check cannot run without it") from None


def check_manifest(root, stage):
    line, command, workdir = stage.cargo_runs[0]
    directory = root / str(workdir).lstrip("/")
    if not (directory / "Cargo.toml").is_file():
        raise BuildWouldFail(f"line {line}: cargo runs in {workdir}, and no Cargo.toml was copied there")

    fetch = cargo(["fetch", "--locked", "--target", TARGET_TRIPLE], directory)
    if fetch.returncode != 0:
        raise BuildWouldFail(f"line {line}: cargo refuses the manifest the build stage gets:\n{fetch.stderr.strip()}")
    print(f"    cargo fetch --locked: the manifest, its targets and Cargo.lock are accepted in {workdir}")

    metadata = cargo(["metadata", "--offline", "--no-deps", "--format-version", "1"], directory)
    if metadata.returncode != 0:
        raise BuildWouldFail(f"line {line}: cargo metadata fails:\n{metadata.stderr.strip()}")
    targets = {
        target["name"]
        for package in json.loads(metadata.stdout)["packages"]
        for target in package["targets"]
        if "bin" in target["kind"]
    }
    for wanted in re.findall(r"--bin[ =]([A-Za-z0-9_-]+)", command):
        if wanted not in targets:
            raise BuildWouldFail(f"line {line}: `--bin {wanted}`, but the copied manifest has bins {sorted(targets)}")
    print(f"    cargo metadata: bin targets {sorted(targets)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dockerfile", nargs="?")
    parser.add_argument("--context", default=".")
    parser.add_argument("--stage", help="the build stage (default: the one whose RUN calls cargo)")
    args = parser.parse_args()
    context = Path(args.context).resolve()
    dockerfile = Path(args.dockerfile).resolve() if args.dockerfile else context / "Dockerfile"

    try:
        all_stages = stages(dockerfile)
        if args.stage:
            chosen = [s for s in all_stages if s.name == args.stage]
        else:
            chosen = [s for s in all_stages if s.cargo_runs]
        if not chosen or not chosen[0].cargo_runs:
            raise BuildWouldFail(f"no stage {args.stage or ''} with a RUN that calls cargo in {dockerfile}")
        stage = chosen[0]
        ignore = DockerIgnore(ignore_file(context, dockerfile))
        print(f"    {dockerfile.name}, stage {stage.name}, context {context}, {ignore.name}")
        with tempfile.TemporaryDirectory(prefix="crawlfleet-docker-context.") as root:
            assemble(context, stage, ignore, Path(root))
            check_manifest(Path(root), stage)
    except BuildWouldFail as failure:
        print(f"error: {dockerfile.name}: the image would not build: {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
