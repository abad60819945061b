"""Chapter 5's exercise that is not a torch mechanism, its prediction stated as a rule: what the grader compares
the learner's function with. The grading kernel's copy of modulecraft has it removed
(`autograder.judging.answer_key`)."""
from __future__ import annotations


def predicted_apply_order(module) -> list:
    """The labels in the order `module.apply(fn)` calls `fn`: each child's subtree first, then the module itself;
    no memo across the tree (a module under two parents is visited under each)."""
    order = []
    for child in module.children():
        order.extend(predicted_apply_order(child))
    return order + [module.label]
