#!/usr/bin/env python3
"""Checks that server/'s includes form a stack: no file includes a file of a layer above its own.

The layers, bottom up, are LAYERS below: the service's parts (server/*.{h,cc}, by module), then
the gRPC shell, the fleet, the daemon and the end-to-end tests (server/<folder>/). A test
(*_test.cc) sits on top of its own folder's layers: it may include anything of its folder and
below, never a folder above. A source file of server/ that no layer names fails the check (place
it in LAYERS). Run by CTest (include_stack_test) and .ci/run.

  deploy/include_stack.py [REPO_ROOT]     exit 0: a stack; 1: the offending includes, listed
"""
import os
import re
import sys

# Bottom up. A top-level entry names a module of server/ (its .h, .cc and *_<part>.cc files);
# an entry ending in "/" names a whole folder.
LAYERS = [
    ["answer_now", "answer_cache", "polite", "shared_flight", "backends", "previous_entry",
     "device_health"],
    ["requests", "service_options"],
    ["tune_job"],
    ["device_tuner"],
    ["service"],
    ["tune_many"],
    ["grpc/"],
    ["fleet/"],
    ["daemon/"],
    ["e2e/"],
]
# Files of a module beyond its .h/.cc: module -> extra stems.
PARTS = {"device_tuner": ["device_tuner_run"], "service": ["service_entries"]}

INCLUDE = re.compile(r'^\s*#\s*include\s+"server/([^"]+)"', re.M)
SOURCE = re.compile(r"\.(h|cc|cu)$")


def layer_of(rel):
    """The layer index of a path relative to server/, or None."""
    if "/" in rel:
        folder = rel.split("/", 1)[0] + "/"
        for i, layer in enumerate(LAYERS):
            if folder in layer:
                return i
        return None
    stem = SOURCE.sub("", rel)
    for i, layer in enumerate(LAYERS):
        for module in layer:
            if stem == module or stem in PARTS.get(module, []):
                return i
    return None


def folder_top(rel):
    """The highest layer of the folder holding `rel` (a test's own level)."""
    if "/" in rel:
        return layer_of(rel)
    return max(i for i, layer in enumerate(LAYERS) if any(not m.endswith("/") for m in layer))


def check(root):
    server = os.path.join(root, "server")
    problems = []
    for dirpath, _, files in os.walk(server):
        for name in sorted(files):
            if not SOURCE.search(name):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, server)
            is_test = name.endswith("_test.cc")
            own = folder_top(rel) if is_test else layer_of(rel)
            if own is None:
                problems.append(f"server/{rel}: in no layer (add it to LAYERS in {__file__})")
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for included in INCLUDE.findall(text):
                theirs = layer_of(included)
                if theirs is None:
                    problems.append(f"server/{rel} includes server/{included}: in no layer")
                elif theirs > own:
                    problems.append(f"server/{rel} (layer {own}) includes server/{included} "
                                    f"(layer {theirs}, above it)")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"include_stack: {len(problems)} include(s) break server/'s stack")
        return 1
    print("include_stack: server/'s includes form a stack")
    return 0


if __name__ == "__main__":
    sys.exit(main())
