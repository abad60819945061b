"""Work stock nbgrader repeats for every cell, done once per grading process: same checks, same results.

nbgrader's `CheckCellMetadata` (run twice per autograde) validates each cell's nbgrader metadata with
`jsonschema.validate`, which first re-checks the schema itself against the JSON Schema meta-schema: a few
milliseconds per cell, a quarter of the grader's own CPU per notebook. Here the schema is checked once and
its validator reused.
"""
from __future__ import annotations

import jsonschema
import nbgrader.nbgraderformat.common as nbgrader_metadata


class _SchemaCheckedOnce:
    """Stands in for the `jsonschema` module inside nbgrader's metadata validator."""

    ValidationError = jsonschema.ValidationError

    def __init__(self):
        self._validators: dict[int, tuple[dict, jsonschema.protocols.Validator]] = {}

    def validate(self, instance, schema) -> None:
        """`jsonschema.validate`, with the schema's own check and validator made on first use."""
        _, validator = self._validators.get(id(schema)) or (None, None)
        if validator is None:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            validator = cls(schema)
            self._validators[id(schema)] = (schema, validator)  # the schema kept alive: its id stays unique
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error


def apply() -> None:
    if not isinstance(nbgrader_metadata.jsonschema, _SchemaCheckedOnce):
        nbgrader_metadata.jsonschema = _SchemaCheckedOnce()
