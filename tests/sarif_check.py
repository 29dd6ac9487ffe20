"""Validates a SARIF log against the OASIS SARIF 2.1.0 JSON schema
(tests/data/sarif-schema-2.1.0.json) with jsonschema (PyPI), formats
checked too. Prints "valid N results"; exits non-zero with every error.

Usage: sarif_check.py SCHEMA LOG
"""

import json
import sys

import jsonschema

schema = json.load(open(sys.argv[1]))
log = json.load(open(sys.argv[2]))
validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
errors = sorted(validator.iter_errors(log), key=lambda e: list(e.path))
for e in errors:
    print("%s: %s" % ("/".join(str(p) for p in e.path), e.message), file=sys.stderr)
if errors:
    sys.exit(1)
print("valid %d results" % sum(len(run.get("results", [])) for run in log["runs"]))
