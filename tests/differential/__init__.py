"""Differential tests: the same scenarios on torch.nn (the oracle) and modulecraft.nn, compared.

A scenario is written once, against a backend `lib` (see backends.py), and returns what it observed:

    @differential
    def test_named_children(lib):
        model = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU())
        return list(model.named_children()), raises(lambda: model[5], "index 5 is out of range")

`differential` (observe.py) runs it on torch, then on modulecraft, normalises both traces (documented in
observe.py) and reports the first place where they differ. Run with `.venv/bin/pytest tests/differential -q`;
`DIFFERENTIAL_ORACLE_ONLY=1` runs torch alone, to check a new scenario against the oracle first.
Where modulecraft differs on purpose, test_documented_differences.py pins the difference on both libraries.
test_properties.py holds the Hypothesis properties on random module graphs; test_seams.py checks that public
operations go through the same overridable methods as torch's (the course plugs learners' code in there).
"""
