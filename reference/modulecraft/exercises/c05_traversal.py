"""Chapter 5's prediction, as the rule a learner states: what the grader compares the learner's function with.

The course's exercises that are not torch mechanisms (predictions, modules written for one exercise) keep their
answers here, next to the mechanisms they are about; the grading kernel's copy of modulecraft has them removed,
like every other name the graded chapter asks for (`autograder.answer_key`)."""
from __future__ import annotations


def predicted_apply_order(module) -> list:
    """The labels in the order `module.apply(fn)` calls `fn`: each child's subtree first, then the module itself;
    no memo across the tree (a module under two parents is visited under each)."""
    order = []
    for child in module.children():
        order.extend(predicted_apply_order(child))
    return order + [module.label]
