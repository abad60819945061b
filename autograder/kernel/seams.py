"""While grading, this copy of modulecraft has no code of its own for what the chapter asks the learner to write:
each such function calls the learner's definition of the same name (the notebook's), or says it is missing."""
import sys


def seam(function):
    """Mark a function of this copy that stands for the learner's."""
    function.__modulecraft_seam__ = True
    return function


def call(name, where, args, kwargs):
    function = getattr(sys.modules.get("__main__"), name, None)
    if function is None:
        raise NotImplementedError(
            f"`{name}` is not written yet: while grading, modulecraft has no {where} of its own and uses yours "
            f"(define `{name}` in the notebook)")
    if getattr(function, "__modulecraft_seam__", False):
        raise NotImplementedError(
            f"`{name}` is modulecraft's own {where}, which does not exist while grading: write your own")
    return function(*args, **kwargs)


def call_routed(target, where, args, kwargs):
    """A function several of the learner's names stand for (the capstone's `_call_impl`: chapter 6's or 11's):
    modulecraft.mechanisms.ROUTES says which one handles this call."""
    from modulecraft import mechanisms
    return call(mechanisms.ROUTES[target](*args, **kwargs), where, args, kwargs)


def sibling(name, where):
    """A function of modulecraft that does what the learner's `name` does: gone while grading this chapter."""
    raise NotImplementedError(
        f"{where} does not exist while grading: it does what your `{name}` does, which this chapter asks you to "
        "write (write it without modulecraft's)")


class Removed:
    """What stands in for a class the learner writes."""

    __removed__ = ""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            f"{type(self).__removed__} does not exist while grading: it is yours to write in this chapter")
