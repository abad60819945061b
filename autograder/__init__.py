"""nbgrader configuration and command line for grading the modulecraft course.

The trust boundary: a grading kernel runs the learner's code, and with it only `probes/` (the probes' runtime and
the chapters' probes, which observe), the seams `answer_key` writes into the kernel's copy of modulecraft (they call
the learner's definitions), `selfcheck.check_my_work` (the chapters' last cell: skipped while grading), `config`'s
constants and, before the learner's first line, `forkserver.become_kernel` (the kernel's confinement). Whatever runs
in a kernel can be changed by the notebook, so none of it decides anything. The rest runs in the grader's own
processes: the answer key's removal (`answer_key`), the sandbox (`sandbox`, `forkserver`'s server, `cgroups`), the
verdicts and the checks of a submission (`verdicts`, `integrity`), feedback, and the grading runs.

`Course` is imported lazily: the chapters' last cell imports `autograder.selfcheck` inside grading kernels,
which should not pay for importing nbgrader when it only has to say "skipped while grading".
"""

__all__ = ["Course"]


def __getattr__(name):
    if name == "Course":
        from .course import Course
        return Course
    raise AttributeError(f"module 'autograder' has no attribute {name!r}")
