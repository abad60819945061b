"""`modulecraft.mechanisms`: the capstone trains on the learner's code, switched one mechanism at a time, and the
table of whose code ran is observed, not claimed."""
from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

import modulecraft
from modulecraft import mechanisms, nn, optim
from course_chapters import SOLUTION_MARKERS, read_notebook, nbgrader_meta

CHAPTERS = ["01_init_and_call", "02_setattr_dispatch", "03_parameters", "04_buffers", "05_traversal", "06_hooks",
            "07_state_dict", "08_lazy_modules", "10_autograd", "11_backward_hooks", "12_optimizers"]
WANTED = {*mechanisms.yours(), "run_forward_pre_hooks", "run_forward_hooks"}
def alone(mechanism: str) -> dict[str, str]:
    return {other: "mine" if other == mechanism else "reference" for other in mechanisms.MECHANISMS}


ALL_MINE = {mechanism: "mine" for mechanism in mechanisms.MECHANISMS}
BATCH_NORM = "batch norm's backward (13)"  # the one mechanism the learner writes in the capstone itself
DERIVED_HERE = "c13_mine_batch_norm"


def learner_namespace() -> dict:
    """Every chapter's solutions run in one namespace, as a learner's earlier notebooks would define them."""
    namespace = {"__name__": "learner"}
    for chapter in CHAPTERS:
        nb = read_notebook(chapter)
        exec(nb.cells[1].source.replace("from autograder.probes import run_tests", ""), namespace)
        for cell in nb.cells:
            if nbgrader_meta(cell).get("solution") or cell.get("id") == "c11_code_helpers":
                tree = ast.parse(_unmarked(cell.source))
                tree.body = [node for node in tree.body if getattr(node, "name", None) in WANTED]
                exec(compile(tree, chapter, "exec"), namespace)
    capstone = {cell.get("id"): cell.source for cell in read_notebook("13_capstone").cells}
    exec(compile(_unmarked(capstone[DERIVED_HERE]), "13_capstone", "exec"), namespace)
    return namespace


def _unmarked(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if line.strip() not in SOLUTION_MARKERS)


@pytest.fixture(scope="module")
def namespace():
    return learner_namespace()


@pytest.fixture(autouse=True)
def restored():
    yield
    mechanisms.use({m: "reference" for m in mechanisms.MECHANISMS}, {})


def digits():
    path = Path(importlib.util.find_spec("sklearn").origin).parent / "datasets" / "data" / "digits.csv.gz"
    table = np.loadtxt(path, delimiter=",", dtype=np.float32)
    order = np.random.default_rng(0).permutation(len(table))
    return table[order, :64] / 16, table[order, 64].astype(np.int64)


def train(epochs=2):
    """The capstone's model and loop (SGD with momentum, BatchNorm), a lazy twin resumed from its state_dict."""
    x, y = digits()
    modulecraft.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 10))
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    norms = []
    model[3].register_full_backward_hook(lambda m, gi, go: norms.append(float(np.linalg.norm(go[0]))))
    model[0].register_forward_hook(lambda m, a, out: None)
    for epoch in range(epochs):
        model.train()
        order = np.random.default_rng(epoch).permutation(1400)
        for start in range(0, 1400, 64):
            rows = order[start:start + 64]
            model.zero_grad()
            nn.CrossEntropyLoss()(model(x[rows]), y[rows]).backward()
            optimizer.step()
    twin = nn.Sequential(nn.LazyLinear(32), nn.LazyBatchNorm1d(), nn.ReLU(), nn.LazyLinear(10))
    twin.load_state_dict(model.state_dict())
    optimizer.state_dict()
    twin.eval()
    with modulecraft.no_grad():
        return float((twin(x[1400:]).argmax(axis=1) == y[1400:]).mean()), norms


def test_the_table_is_the_chapters_yours():
    """One source of truth: every name the capstone lists is the one its chapter's probe module grades, at the
    same place in modulecraft."""
    from autograder import probes
    chapters = {}
    for chapter in CHAPTERS:
        chapters.update(probes.yours_of(chapter))
    chapters["_call_impl"] = probes.yours_of("06_hooks")["_call_impl"]  # chapter 1's `call_impl` is 11's name too
    chapters["call_impl"] = probes.yours_of("11_backward_hooks")["call_impl"]
    chapters.update(mechanisms.MECHANISMS[BATCH_NORM])
    assert {name: chapters[name] for name in mechanisms.yours()} == mechanisms.yours()
    # every formula chapter 10 derives that the training path runs is a row (the elementwise ones never run there)
    derived = {name for name in probes.yours_of("10_autograd") if name.endswith(("_backward", "_gradients"))}
    assert derived - set(mechanisms.yours()) == {"add_gradients", "sub_gradients", "mul_gradients", "div_gradients",
                                                 "neg_backward", "pow_backward", "exp_backward"}


@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "no-affine"])
def test_the_derived_batch_norm_backward_gives_torchs_gradients(namespace, training, affine):
    """The capstone's solution and modulecraft's own formula, each against torch 2.13's gradients."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(13)
    x, grad = rng.normal(size=(7, 4)) * 2 + 1, rng.normal(size=(7, 4))
    weight, bias = (rng.uniform(0.5, 2, size=4), rng.normal(size=4)) if affine else (None, None)
    running_mean, running_var = rng.normal(size=4), rng.uniform(0.05, 1, size=4)
    tensors = [torch.tensor(value, requires_grad=True) for value in (x, weight, bias) if value is not None]
    torch.nn.functional.batch_norm(tensors[0], torch.tensor(running_mean), torch.tensor(running_var),
                                   *(tensors[1:] or (None, None)), training=training, eps=0.1).backward(
        torch.tensor(grad))
    expected = [t.grad.numpy() for t in tensors]

    def gradients():
        leaves = [modulecraft.Tensor(value, requires_grad=True) for value in (x, weight, bias) if value is not None]
        nn.functional.batch_norm(leaves[0], running_mean.copy(), running_var.copy(), *(leaves[1:] or (None, None)),
                                 training=training, eps=0.1).backward(grad)
        return [t.grad for t in leaves]
    assert all(np.allclose(got, want, atol=1e-10) for got, want in zip(gradients(), expected, strict=True))
    with mechanisms.installed(alone(BATCH_NORM), namespace) as gaps:
        assert not gaps and nn.functional.NativeBatchNormBackward0.backward is namespace["batch_norm_backward"]
        assert all(np.allclose(got, want, atol=1e-10) for got, want in zip(gradients(), expected, strict=True))


def test_all_mine_trains_as_the_reference_and_the_observed_table_says_yours(namespace):
    reference, reference_norms = train()
    mechanisms.use(ALL_MINE, namespace)
    with mechanisms.observe() as observed:
        mine, norms = train()
    assert mine == reference and np.allclose(norms, reference_norms)
    assert observed.whose() == {mechanism: "yours" for mechanism in mechanisms.MECHANISMS}, observed.table()


def test_the_table_accounts_for_every_call_of_an_epoch(namespace):
    """Every Python call that starts while the block runs is in exactly one row: the rows add up to what another hook
    than the observer's (`sys.settrace`) sees start, and each row names who wrote the code that ran."""
    mechanisms.use(ALL_MINE, namespace)
    started, generators = [0], set()

    def tracer(frame, event, arg):
        if event == "call" and frame not in generators:  # a generator's frame is called again at each resumption
            started[0] += 1
            if frame.f_code.co_flags & mechanisms.GENERATORS:
                generators.add(frame)

    with mechanisms.observe() as observed:
        sys.settrace(tracer)
        train(epochs=1)
        sys.settrace(None)
    assert observed.total() == started[0] > 10_000
    table = observed.table()
    assert f"in all {started[0]} calls" in table
    for given in ("modulecraft.autograd.function (most: Function.apply)", "modulecraft.utils.hooks",
                  "modulecraft.optim.optimizer", "modulecraft.autograd.tensor", "numpy"):
        assert given in table
    yours = sum(observed.calls[m, "yours"] for m in mechanisms.MECHANISMS)
    assert f"{yours} in your mechanisms" in table and observed.rest[mechanisms.LIBRARIES, "learner"] > 0


def test_a_switched_mechanism_runs_the_reference_and_the_table_shows_it(namespace):
    whose = {**ALL_MINE, "optimizer (12)": "reference"}
    mechanisms.use(whose, namespace)
    with mechanisms.observe() as observed:
        train(epochs=1)
    assert observed.whose()["optimizer (12)"] == "reference"
    assert {m for m, side in observed.whose().items() if side != "yours"} == {"optimizer (12)"}


def test_the_observer_sees_code_that_runs_not_switches(namespace):
    """A learner function that calls modulecraft's own code (captured before `use`) shows as the reference's."""
    captured = nn.Module.state_dict
    delegating = {**namespace, "state_dict": lambda self, *a, **k: captured(self, *a, **k)}
    mechanisms.use(ALL_MINE, delegating)
    with mechanisms.observe() as observed:
        nn.Linear(2, 2).state_dict()
    assert observed.calls["state_dict (7)", "reference"] > 0


def test_sharing_a_target_switches_both():
    assert mechanisms.switched({"backward hooks in _call_impl (11)": "reference"}) == {
        "backward hooks in _call_impl (11)", "forward hooks in _call_impl (6)"}


def test_a_missing_name_names_itself_and_the_line_to_switch(namespace):
    partial = {key: value for key, value in namespace.items() if key != "accumulate_grad"}
    with pytest.raises(NameError, match=r"`accumulate_grad` not defined.*'engine \(10\)': 'mine'"):
        mechanisms.use(ALL_MINE, partial)
    assert nn.Module.named_modules is namespace["named_modules"]  # the others are in place
    from modulecraft.autograd.graph import AccumulateGrad
    assert AccumulateGrad.backward is not namespace["accumulate_grad"]


def test_reference_only_restores_every_original_and_the_learners_after(namespace):
    originals = {t: mechanisms._original(t) for t in set(mechanisms.yours().values())}
    mechanisms.use(ALL_MINE, namespace)
    with mechanisms.reference_only():
        from autograder.probes import resolve
        assert {t: resolve(t) for t in originals} == originals
        from modulecraft.nn import functional
        assert functional.edges is originals["modulecraft.autograd.tensor:edges"]
    assert nn.Module.named_modules is namespace["named_modules"]


def test_a_wrong_learner_function_still_fails_its_visible_test_after_use(namespace, capsys):
    """The self-tests compare the learner's code with modulecraft's own even once the learner's is in place."""
    import sys
    from autograder.probes import run_tests

    def wrong_named_modules(self, memo=None, prefix="", remove_duplicate=True):
        yield prefix, self  # forgets the children
    main = sys.modules["__main__"]
    saved = dict(vars(main))
    try:
        vars(main).update({**namespace, "named_modules": wrong_named_modules})
        mechanisms.use(ALL_MINE, vars(main))
        with pytest.raises(AssertionError):
            run_tests("c05_named_modules_visible")
    finally:
        vars(main).clear()
        vars(main).update(saved)


def test_read_whose_takes_a_literal_only():
    assert mechanisms.read_whose('WHOSE = {"engine (10)": "reference"}\n') == {"engine (10)": "reference"}
    assert mechanisms.read_whose('WHOSE = dict(a="reference")') == {}
    assert mechanisms.read_whose("WHOSE = {") == {}


def test_installed_is_scoped_and_reports_gaps(namespace):
    mechanisms.use(ALL_MINE, namespace)
    partial = {key: value for key, value in namespace.items() if key != "SGD"}
    with mechanisms.installed(alone("optimizer (12)"), partial) as gaps:
        assert gaps == {"optimizer (12)": ["SGD"]}
        assert nn.Module.named_modules is mechanisms._original("modulecraft.nn.modules.module:Module.named_modules")
    assert nn.Module.named_modules is namespace["named_modules"]


def test_a_shared_target_routes_each_call_to_the_mechanism_in_place(namespace):
    """Alone, chapter 6's `_call_impl` handles calls without backward hooks; modulecraft's handles the others."""
    seen = []
    spy = {**namespace, "_call_impl": lambda self, *a, **k: (seen.append(type(self).__name__),
                                                             namespace["_call_impl"](self, *a, **k))[1]}
    with mechanisms.installed(alone("forward hooks in _call_impl (6)"), spy) as gaps:
        assert gaps == {}
        plain, hooked = nn.ReLU(), nn.Identity()
        hooked.register_full_backward_hook(lambda *args: None)
        plain(np.ones(2, dtype=np.float32))
        hooked(modulecraft.Tensor(np.ones(2, dtype=np.float32), requires_grad=True))
    assert seen == ["ReLU"]


def test_read_whose_ignores_what_is_not_a_switch():
    assert mechanisms.read_whose('WHOSE = {"engine (10)": "Reference", "nonsense": "reference"}') == {}
    assert mechanisms.read_whose('WHOSE = {[1]: 2}') == {}
    assert mechanisms.read_whose("x = 1") == {}


def test_also_adds_one_mechanism_to_what_use_put_in_place(namespace):
    mechanisms.use({**ALL_MINE, "engine (10)": "reference"}, namespace)
    assert mechanisms.also("engine (10)") == ALL_MINE
    assert mechanisms.also("optimizer (12)") == {**ALL_MINE, "engine (10)": "reference"}


def test_the_solved_notebook_trains_on_the_learners_code_in_every_row(monkeypatch):
    """Top to bottom as graded (no figures, no self-check; 13.6 trains one epoch instead of five): the observed table
    of 13.7 says yours in every row, and the resumed run agrees."""
    from nbclient import NotebookClient
    from course_chapters import notebook_path
    monkeypatch.setenv("MODULECRAFT_GRADING", "1")  # no figures, no self-check
    nb = read_notebook("13_capstone")
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(notebook_path("13_capstone").parent)}}).execute()
    (resumed,) = [cell for cell in nb.cells if cell.get("id") == "c13_code_23"]
    printed = "".join(output.get("text", "") for output in resumed.outputs)
    assert "your code in every row: True" in printed and "same 22 losses: True" in printed
    assert "held-out accuracy, original and resumed: 0.9445843828715366 0.9445843828715366" in printed
    for row in ("  train_epoch", "  attach_statistics", "modulecraft.autograd.function (most: Function.apply)",
                "modulecraft.utils.hooks", "modulecraft.optim.optimizer", "in all "):
        assert row in printed, row


def test_a_test_cell_of_an_older_capstone_says_where_the_current_version_is():
    """A workspace notebook from before the capstone's rewrite calls `run_tests("c13_crafted_visible")`."""
    from autograder import probes
    with pytest.raises(LookupError, match=r"older version of its chapter.*\.updated"):
        probes.run_probe("c13_crafted_visible", None, 0)
