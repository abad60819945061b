"""The grader's second test chapter (tests/autograder/chapters/91_other): the wrong chapter to submit."""
from . import probe

YOURS = {"double": "autograder.probes.c91_other:twice"}


def twice(x):
    """The toy's answer (a toy's answer may sit anywhere: it is not modulecraft's, see c90_toy)."""
    return 2 * x


@probe("test_double")
def double(yours, draw, check):
    x = draw.int(-1000, 1000)
    check("double of an integer", lambda: int(yours.double(x)))
