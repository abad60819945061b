import sys

# jsonschema (under nbformat and nbgrader) imports rfc3987-syntax, when installed, for its optional "iri" format
# check, and that package compiles 38 grammars at import: 2-3 s of every `python -m autograder` (a self-check, a
# grading run). No schema the grader validates uses that format, so the command goes without it (jsonschema then
# skips that check). Here, not in the package: learners' kernels import `autograder.probes` and keep their jsonschema.
sys.modules.setdefault("rfc3987_syntax", None)

from .cli import main  # noqa: E402 (after the line above)

raise SystemExit(main())
