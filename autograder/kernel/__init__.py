"""What runs inside a grading kernel besides the learner's code (with `autograder.probes`, which stays where the
notebooks import it from): the kernel's confinement before the learner's first line (`confine`) and the seams that
stand in the kernel's modulecraft for what the chapter asks the learner to write (`seams`, copied into it as
`modulecraft._yours`). A notebook can change whatever runs in its kernel, so none of it decides anything: that is
`autograder.judging`'s, in the grader's own processes."""
