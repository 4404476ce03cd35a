"""The layering the build relies on: every #include "..." in SOL's own sources names a file of the
same layer or a lower one, as layers.txt orders them. Reads the files only; fails with each upward
include, by file and line."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("*.cpp", "*.hpp", "*.h", "*.c", "*.def", "*.inc")
EXEMPT = ("tests/", "bench/", "build")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_table(path):
    """[(prefix, rank, layer)], longest prefix first."""
    rows = []
    rank = 0
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        layer, prefixes = line[0], line[1:]
        assert prefixes, "layers.txt: layer %s has no path" % layer
        rows += [(p, rank, layer) for p in prefixes]
        rank += 1
    return sorted(rows, key=lambda r: -len(r[0]))


def layer_of(table, rel):
    for prefix, rank, layer in table:
        if rel == prefix or (prefix.endswith("/") and rel.startswith(prefix)):
            return rank, layer
    return None


def upward_includes(root, table):
    """(file:line, its layer, the included file, its layer) for every include of a higher layer,
    and the sources no layer holds."""
    bad, homeless = [], []
    for pattern in SOURCES:
        for path in sorted(root.rglob(pattern)):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(EXEMPT) or "/build" in rel:
                continue
            mine = layer_of(table, rel)
            if mine is None:
                homeless.append(rel)
                continue
            for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                if not (root / target).is_file():
                    local = (path.parent / target).resolve()
                    if not local.is_file():
                        continue  # generated (symbols.inc) or a system-style path
                    target = local.relative_to(root).as_posix()
                theirs = layer_of(table, target)
                if theirs and theirs[0] > mine[0]:
                    bad.append("%s:%d (%s) includes %s (%s)" % (rel, n, mine[1], target, theirs[1]))
    return bad, homeless


def test_no_source_includes_a_higher_layer():
    table = read_table(ROOT / "layers.txt")
    bad, homeless = upward_includes(ROOT, table)
    assert not homeless, "sources in no layer of layers.txt:\n" + "\n".join(homeless)
    assert not bad, "upward includes (layers.txt):\n" + "\n".join(bad)


def test_a_planted_upward_include_is_found(tmp_path):
    # The check itself: a hal header that includes the executor is reported.
    (tmp_path / "hal").mkdir()
    (tmp_path / "capture/exec").mkdir(parents=True)
    (tmp_path / "capture/exec/executor.hpp").write_text("#pragma once\n")
    (tmp_path / "hal/backend.hpp").write_text('#pragma once\n#include "capture/exec/executor.hpp"\n')
    bad, _ = upward_includes(tmp_path, read_table(ROOT / "layers.txt"))
    assert bad == ["hal/backend.hpp:2 (hal) includes capture/exec/executor.hpp (exec)"]


if __name__ == "__main__":
    sys.exit(__import__("pytest").main([__file__, "-q"]))
