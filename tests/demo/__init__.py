"""Tests of the instructor demos: the steppers and the demo build."""
