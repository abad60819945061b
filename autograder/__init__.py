"""nbgrader configuration and command line for grading the modulecraft course.

`Course` is imported lazily: the chapters' last cell imports `autograder.selfcheck` inside grading kernels,
which should not pay for importing nbgrader when it only has to say "skipped while grading".
"""

__all__ = ["Course"]


def __getattr__(name):
    if name == "Course":
        from .course import Course
        return Course
    raise AttributeError(f"module 'autograder' has no attribute {name!r}")
