"""The course's exercises that have no counterpart in torch (a training loop, a gradient watcher, ...), written
once here so that the grader can run a chapter's probes on them.

While a chapter is graded, its kernel's copy of modulecraft has none of these functions (`autograder.answer_key`
removes every name the chapter's probe module lists in `YOURS`): they are the answer key of that chapter only.
"""
