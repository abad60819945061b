"""nbgrader configuration and command line for grading the modulecraft course."""
