"""The course's exercises that are not torch mechanisms (predictions stated as rules, modules written for one
exercise), one module per chapter: the reference the grader compares a learner's code with. While a chapter is
graded, the kernel's copy of modulecraft has that chapter's names removed (`autograder.judging.answer_key`)."""
