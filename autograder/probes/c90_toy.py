"""The grader's own test chapter (tests/autograder/chapters/90_toy): two exercises with numpy counterparts.

Its answers live in numpy, which every kernel has: only the course's chapters, whose answers are modulecraft's,
have them removed while grading (`autograder.judging.answer_key`)."""
import numpy as np

from . import probe

YOURS = {"add": "numpy:add", "scale": "numpy:multiply"}


@probe("test_add")
def add(yours, draw, check):
    a, b = draw.array(3), draw.array(3)
    x, y = draw.int(-50, 50), draw.int(-50, 50)
    check("add of two arrays", lambda: np.asarray(yours.add(a, b), dtype=np.float32), close=True)
    check("add of two integers", lambda: int(yours.add(x, y)))
    check("add handles negative floats", lambda: np.asarray(yours.add(-abs(a), b), dtype=np.float32), close=True)


@probe("test_scale")
def scale(yours, draw, check):
    x, factor = draw.array(4), draw.int(2, 9)
    original = x.copy()
    check("scale multiplies every element", lambda: np.asarray(yours.scale(x, factor), dtype=np.float32), close=True)
    check("scale must return a new array, not modify its input", lambda: yours.scale(x, factor) is not x)
    check("scale must leave its input unchanged", lambda: bool(np.array_equal(x, original)))
