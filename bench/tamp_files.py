"""Readers of the JSON files `tamp` writes, for the bench scripts.

`tamp run --summary_json` (and `tamp summarize`) writes one tamp.events.RunSummary, and
`--metrics_file` one StepMetrics or EvalMetrics per line (proto/events.proto); workers print
one WorkerEvent per line. All name fields as events.proto does and write integers as JSON
numbers. The summary and metrics files carry "format_version"; the readers refuse any other
version than FORMAT_VERSION (tools/tamp/summary.h kJsonFormatVersion) rather than misread it.
"""

import json

FORMAT_VERSION = 2


def _checked(record, path, where):
    version = record.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}{where}: format_version {version}, expected {FORMAT_VERSION}"
                         " (a file of another tamp version: rerun it)")
    return record


def read_summary(path):
    """The run summary (a dict) of a --summary_json file."""
    with open(path) as f:
        return _checked(json.load(f), path, "")


def read_metrics(path):
    """The lines of a --metrics_file, as dicts: step lines, and evaluation lines (the ones
    with "test_accuracy")."""
    with open(path) as f:
        return [_checked(json.loads(line), path, f" line {number}")
                for number, line in enumerate(f, 1) if line.strip()]


def read_events(path):
    """The WorkerEvent lines (dicts) of a worker's stdout, skipping its other lines."""
    events = []
    with open(path) as f:
        for line in f:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and "kind" in event:
                events.append(event)
    return events
