"""The generated block of a doc: everything from a begin marker to an end marker, markers
included, which a bench script rewrites from its results while the rest of the file stays
hand-written."""

import sys


def replace_block(text, begin, end, block, path):
    """`text` with its block from `begin` through `end` replaced by `block` (which carries both
    markers); exits naming `path` when the markers are missing or out of order."""
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        sys.exit(f"{path} lacks the markers {begin} / {end}")
    return text[:start] + block + text[stop + len(end):]
