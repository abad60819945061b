"""What judges a submission, in the grader's own processes, out of the learner's reach: the kernel's modulecraft
without the answer key (`answer_key`), the sandbox every kernel runs in (`sandbox`; `forkserver`, whose server
forks each kernel; `cgroups`; `libraries`, the libraries a kernel may see), the checks of a submission before and
after it runs (`integrity`), the verdicts (`verdicts`: the probes run again on the reference, outside the kernel)
and what feedback shows (`feedback`). A kernel's process is forked from the forkserver, but from the fork on it runs
only `autograder.kernel.confine` and then the kernel: no code of the kernel's calls into this package."""
