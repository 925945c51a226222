"""Checks that no #include crosses a layer the wrong way.

The layers are docs/architecture.md's table ("| rank | folder | ..."): a file under a folder
may include its own folder and the folders of a lower rank, never one of the same rank nor a
higher one. A test source (*_test.cc, *_test.cu, test_*.h, *_testing.h) in server/ or worker/
may also include the other one, since those tests start both peers in one process.

    python3 tests/layers.py docs/architecture.md FILE...

Prints every wrong include as "FILE:LINE: FOLDER (rank R) includes FOLDER (rank R)" and
exits 1 when there is one, or when a folder of the table has no file among FILEs (so that a
folder that stopped being checked is noticed); exits 2 when the table cannot be read.
"""

import os
import re
import sys

ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*`?([a-z_]+)/`?\s*\|")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_0-9]+)/')
PEERS = {"server", "worker"}


def read_ranks(doc):
    ranks = {}
    with open(doc, encoding="utf-8") as f:
        for line in f:
            match = ROW.match(line)
            if match:
                ranks[match.group(2)] = int(match.group(1))
    return ranks


def is_test_source(path):
    name = os.path.basename(path)
    return bool(re.search(r"_test\.(cc|cu)$|^test_.*\.h$|_testing\.h$", name))


def folder_of(path, ranks):
    """The table's folder a source path is under (paths may carry a runfiles prefix)."""
    parts = path.replace(os.sep, "/").split("/")
    for i, part in enumerate(parts):
        if part in ranks and i + 1 < len(parts):
            return part
    return None


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-5], file=sys.stderr)
        return 2
    ranks = read_ranks(argv[1])
    if len(ranks) < 2:
        print(f"{argv[1]}: no layer table (rows '| rank | folder/ | ...')", file=sys.stderr)
        return 2
    seen = set()
    wrong = []
    for path in argv[2:]:
        folder = folder_of(path, ranks)
        if folder is None:
            wrong.append(f"{path}: under no folder of the layer table")
            continue
        seen.add(folder)
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                match = INCLUDE.match(line)
                if not match or match.group(1) not in ranks:
                    continue  # System and third-party headers.
                target = match.group(1)
                if target == folder or ranks[target] < ranks[folder]:
                    continue
                if {folder, target} == PEERS and is_test_source(path):
                    continue
                wrong.append(f"{path}:{number}: {folder}/ (rank {ranks[folder]}) includes "
                             f"{target}/ (rank {ranks[target]})")
    for folder in sorted(set(ranks) - seen):
        wrong.append(f"{folder}/: in the layer table but none of its sources was checked")
    for line in wrong:
        print(line)
    print(f"{len(argv) - 2} files, {len(wrong)} wrong includes")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
