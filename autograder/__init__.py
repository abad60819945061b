"""nbgrader configuration and command line for grading the modulecraft course.

`Course` is imported lazily: the chapters' last cell imports `autograder.selfcheck` inside grading kernels,
which should not pay for importing nbgrader when it only has to say "skipped while grading".
"""

import sys

__all__ = ["Course"]

# jsonschema (under nbformat and nbgrader) imports rfc3987-syntax, when installed, for its optional "iri" format
# check, and that package compiles 38 grammars at import: 2-3 s of every grading process and self-check. No schema
# the grader validates uses that format, so its processes go without it (jsonschema then skips that check).
sys.modules.setdefault("rfc3987_syntax", None)


def __getattr__(name):
    if name == "Course":
        from .course import Course
        return Course
    raise AttributeError(f"module 'autograder' has no attribute {name!r}")
