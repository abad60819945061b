"""Work stock nbgrader repeats for every cell or step, done once per grading process: same checks, same results.

- nbgrader's `CheckCellMetadata` (run twice per autograde) validates each cell's nbgrader metadata with
  `jsonschema.validate`, which first re-checks the schema itself against the JSON Schema meta-schema: a few
  milliseconds per cell, a quarter of the grader's own CPU per notebook. Here the schema is checked once per
  process and its validator reused, and metadata found valid is not validated again (a chapter's cells are the
  same in every submission: the check was still a twelfth of the grader's CPU).
- nbgrader opens the gradebook nine times per autograde, each time with a new SQLAlchemy engine that inspects
  the database and creates the tables it lacks: 5 to 7 ms each. Here each database's engine is made, and its
  tables checked, on the first open in the process; later opens reuse it (a new session each, as before).
- nbconvert validates the whole notebook against the nbformat schema after each of the dozen preprocessors of a
  conversion (two conversions per autograde): a tenth of the grader's own CPU per notebook. Here, with
  nbconvert's own `optimistic_validation`, once after the last one: a notebook they leave invalid still fails.
- nbgrader's `OverwriteCells` asks the gradebook for each cell with a grade id: its source cell, and for a grade
  cell its points, two joined queries a cell (another tenth). Here the notebook's cells are fetched once, and
  the same checks (type, locked, points, checksum: a changed locked cell gets its source back) read them.
- nbgrader's `Autograde` converts each notebook twice: the sanitizing steps, then writing the result to the
  autograded folder, reading it back and running the grading steps: a notebook written, read and validated once
  more, and copied twice more (a seventh of the grader's own CPU per notebook). Here the same steps, in the same
  order, run in one conversion, with the kernel in the autograded folder as in stock's second pass.
"""
from __future__ import annotations

import json
import os

import jsonschema
import nbformat
import nbgrader.api
import nbgrader.nbgraderformat.common as nbgrader_metadata
from nbconvert.exporters.exporter import ResourcesDict
from nbgrader.api import MissingEntry
from nbgrader.converters import Autograde
from nbgrader.preprocessors import OverwriteCells
from nbgrader.utils import setenv
from sqlalchemy.orm import scoped_session, sessionmaker
from traitlets.config import Config


class _SchemaCheckedOnce:
    """Stands in for the `jsonschema` module inside nbgrader's metadata validator."""

    ValidationError = jsonschema.ValidationError
    VALID_KEPT = 10_000  # metadata seen valid, per schema, remembered (then forgotten all at once)

    def __init__(self):
        self._validators: dict[str, tuple[jsonschema.protocols.Validator, set[str]]] = {}  # by the schema's text

    def validate(self, instance, schema) -> None:
        """`jsonschema.validate`, with the schema's own check and validator made once per process (nbgrader reads
        the schema anew for each notebook), and the metadata found valid remembered by content: the same cells
        come back in every submission of a chapter, twice."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._validators:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            self._validators[key] = (cls(schema), set())
        validator, valid = self._validators[key]
        try:
            content = json.dumps(instance, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError):  # not plain JSON: checked every time
            content = None
        if content is not None and content in valid:
            return
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error
        if content is not None:
            if len(valid) >= self.VALID_KEPT:
                valid.clear()
            valid.add(content)


_stock_gradebook_init = nbgrader.api.Gradebook.__init__
_engines: dict[str, object] = {}  # database URL -> the engine of its first open in this process


def _open_gradebook(self, db_url: str, course_id: str = "default_course", authenticator=None) -> None:
    """`Gradebook.__init__`, with the engine (and the check of its tables) of the first open of `db_url`."""
    if db_url not in _engines:
        _stock_gradebook_init(self, db_url, course_id, authenticator)
        _engines[db_url] = self.engine
        return
    self.engine = _engines[db_url]
    self.db = scoped_session(sessionmaker(autoflush=True, bind=self.engine, future=True))
    self.check_course(course_id=course_id)
    self.course_id = course_id
    self.authenticator = authenticator


class _CellsOfOneNotebook:
    """The gradebook as `OverwriteCells` asks it for each cell, answered from the notebook's cells fetched once;
    anything else it is asked goes to the gradebook."""

    def __init__(self, gradebook: nbgrader.api.Gradebook, notebook: str, assignment: str):
        self._gradebook = gradebook
        cells = gradebook.find_notebook(notebook, assignment)
        self._source = {cell.name: cell for cell in cells.source_cells}
        self._graded = {cell.name: cell for cell in [*cells.task_cells, *cells.grade_cells]}  # grade cells win

    def find_source_cell(self, name: str, notebook: str, assignment: str):
        return self._found(self._source, name, "source cell", notebook, assignment)

    def find_graded_cell(self, name: str, notebook: str, assignment: str):
        return self._found(self._graded, name, "grade cell", notebook, assignment)

    @staticmethod
    def _found(cells: dict, name: str, kind: str, notebook: str, assignment: str):
        if name not in cells:
            raise MissingEntry(f"No such {kind}: {assignment}/{notebook}/{name}")
        return cells[name]

    def __getattr__(self, name: str):
        return getattr(self._gradebook, name)


class OverwriteCellsFetchedOnce(OverwriteCells):
    """nbgrader's `OverwriteCells`, reading the notebook's cells from one fetch (see the module's docstring)."""

    def preprocess_cell(self, cell, resources, index):
        if not isinstance(self.gradebook, _CellsOfOneNotebook):  # a new notebook: `preprocess` opened the gradebook
            self.gradebook = _CellsOfOneNotebook(self.gradebook, self.notebook_id, self.assignment_id)
        return super().preprocess_cell(cell, resources, index)


_stock_convert = Autograde.convert_single_notebook


def _convert_in_one_pass(self: Autograde, notebook_filename: str) -> None:
    """`Autograde.convert_single_notebook`: its sanitizing steps then its grading steps, in one conversion."""
    self._sanitizing = True  # the input is the submitted notebook
    self.exporter._preprocessors = []
    for step in [*self.sanitize_preprocessors, *self.autograde_preprocessors]:
        self.exporter.register_preprocessor(step)
    resources = self.init_single_notebook_resources(notebook_filename)
    ids = resources["nbgrader"]
    # what nbconvert's `from_filename` records, with the folder stock's second pass reads from: the autograded
    # one, where nbgrader copied the chapter's files (the kernel runs there)
    destination = self._format_dest(ids["assignment"], ids["student"])
    os.makedirs(destination, exist_ok=True)  # made by stock's first write
    resources["metadata"] = ResourcesDict(name=os.path.splitext(os.path.basename(notebook_filename))[0],
                                          path=destination)
    notebook = nbformat.read(notebook_filename, as_version=4)
    with setenv(NBGRADER_EXECUTION="autograde"):
        output, resources = self.exporter.from_notebook_node(notebook, resources)
    self.write_single_notebook(output, resources)


def autograde_config() -> Config:
    config = Config()
    config.Exporter.optimistic_validation = True
    config.Autograde.sanitize_preprocessors = [
        "nbgrader.preprocessors.ClearOutput",
        "nbgrader.preprocessors.DeduplicateIds",
        "nbgrader.preprocessors.OverwriteKernelspec",
        "autograder.tuning.OverwriteCellsFetchedOnce",
        "nbgrader.preprocessors.CheckCellMetadata",
    ]
    return config


def apply() -> None:
    if not isinstance(nbgrader_metadata.jsonschema, _SchemaCheckedOnce):
        nbgrader_metadata.jsonschema = _SchemaCheckedOnce()
    nbgrader.api.Gradebook.__init__ = _open_gradebook
    Autograde.convert_single_notebook = _convert_in_one_pass
