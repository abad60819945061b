"""nbgrader configuration and command line for grading the modulecraft course.

The trust boundary, in the layout: a grading kernel runs the learner's code and with it only `probes/` (the
probes' runtime and the chapters' probes, which observe), `kernel/` (its confinement before the learner's first
line, and the seams its modulecraft calls the learner's definitions through), `selfcheck.check_my_work` (the
chapters' last cell: skipped while grading) and `config`'s constants. Whatever runs in a kernel can be changed by
the notebook, so none of it decides anything. What judges runs in the grader's own processes: `judging/` (the
answer key's removal, the sandbox, the verdicts, the checks of a submission, feedback); the rest of this package
runs the grading (`course`, `grading`, `workers`, the Dask modules), the command line and the hub.

`Course` is imported lazily: the chapters' last cell imports `autograder.selfcheck` inside grading kernels,
which should not pay for importing nbgrader when it only has to say "skipped while grading".
"""

__all__ = ["Course"]


def __getattr__(name):
    if name == "Course":
        from .course import Course
        return Course
    raise AttributeError(f"module 'autograder' has no attribute {name!r}")
