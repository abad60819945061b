"""Losses against torch: values and gradients (all-ignored batches, class weights, label smoothing), the target
checks and their exception types, and the loss modules."""

import numpy as np
import pytest

from .observe import differential, raises

LOGITS = [[1.0, 2.0, 3.0], [0.5, -1.0, 2.0], [0.0, 0.0, -3.0]]
WEIGHT = [0.2, 1.0, 3.0]


def _indices(lib, values, dtype=np.int64):
    array = np.asarray(values, dtype=dtype)
    return lib.torch.from_numpy(array) if lib.name == "torch" else array


def _loss_and_gradient(lib, loss):
    (loss.sum() if loss.ndim else loss).backward()
    return loss


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("function", ["cross_entropy", "nll_loss"])
@differential
def test_every_target_ignored_gives_torchs_loss_and_zero_gradients(lib, function, reduction):
    """A batch that is all padding: mean is 0 / 0 (NaN, as torch), and the gradient is zeros, not NaN."""
    logits = lib.leaf(LOGITS)
    loss = getattr(lib.nn.functional, function)(logits, _indices(lib, [-100, -100, -100]), reduction=reduction)
    _loss_and_gradient(lib, loss)
    return lib.clone(loss), lib.clone(logits.grad)


@differential
def test_zero_class_weights_of_every_target_give_torchs_nan(lib):
    logits = lib.leaf(LOGITS)
    loss = lib.nn.functional.cross_entropy(logits, _indices(lib, [1, 1, -100]), weight=lib.tensor([1.0, 0.0, 1.0]))
    loss.backward()
    return lib.clone(loss), lib.clone(logits.grad)


@pytest.mark.parametrize("case", ["n_by_1", "batch_size", "float_indices", "int32_indices", "bool_indices",
                                  "out_of_range", "negative", "out_of_range_1d", "one_d_input_two_targets",
                                  "scalar_target_for_a_batch"])
@pytest.mark.parametrize("function", ["cross_entropy", "nll_loss"])
@differential
def test_targets_are_checked_as_torch_checks_them(lib, function, case):
    logits = lib.leaf(LOGITS)
    target, phrases = {
        "n_by_1": (_indices(lib, [[1], [2], [0]]), ("0D or 1D target tensor expected, multi-target not supported",)),
        "batch_size": (_indices(lib, [1, 2]), ("Expected input batch_size (3) to match target batch_size (2).",)),
        "float_indices": (_indices(lib, [1, 2, 0], np.float32),
                          ("expected target dtype to be Long or Byte, but got Float",)),
        "int32_indices": (_indices(lib, [1, 2, 0], np.int32),
                          ("expected target dtype to be Long or Byte, but got Int",)),
        "bool_indices": (_indices(lib, [True, False, True], bool),
                         ("expected target dtype to be Long or Byte, but got Bool",)),
        "out_of_range": (_indices(lib, [1, 3, 0]), ("Target 3 is out of bounds.",)),
        "negative": (_indices(lib, [1, -2, 0]), ("Target -2 is out of bounds.",)),
        "out_of_range_1d": (_indices(lib, 7), ("Target 7 is out of bounds.",)),
        "one_d_input_two_targets": (_indices(lib, [1, 2]),
                                    ("For 1D input, 1D target must have size 1, but got target size: 2",)),
        "scalar_target_for_a_batch": (_indices(lib, 1),
                                      ("Expected input batch_size (3) to match target batch_size (0).",)),
    }[case]
    if case in ("out_of_range_1d", "one_d_input_two_targets"):
        logits = lib.leaf(LOGITS[0])
    return raises(lambda: getattr(lib.nn.functional, function)(logits, target), *phrases)


@differential
def test_byte_indices_and_a_one_element_target_for_one_sample_are_accepted(lib):
    logits = lib.leaf(LOGITS)
    byte = lib.nn.functional.nll_loss(logits, _indices(lib, [1, 2, 0], np.uint8))
    single = lib.nn.functional.cross_entropy(lib.leaf(LOGITS[0]), _indices(lib, [2]))
    return lib.clone(byte), lib.clone(single)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 1])
@differential
def test_label_smoothing_has_torchs_values_and_gradients(lib, reduction, weighted, ignore_index):
    logits = lib.leaf(LOGITS)
    loss = lib.nn.functional.cross_entropy(logits, _indices(lib, [1, 2, 0]), reduction=reduction,
                                           weight=lib.tensor(WEIGHT) if weighted else None,
                                           ignore_index=ignore_index, label_smoothing=0.2)
    _loss_and_gradient(lib, loss)
    return lib.clone(loss), lib.clone(logits.grad), loss.grad_fn.name()


@differential
def test_label_smoothing_edge_values_as_torch(lib):
    """1.0 is allowed, above 1.0 refused, a negative value counts as none; one sample; every target ignored."""
    def smoothed(value, target=(1, 2, 0), logits=LOGITS):
        leaf = lib.leaf(logits)
        loss = lib.nn.functional.cross_entropy(leaf, _indices(lib, list(target) if len(target) != 1 else target[0]),
                                               label_smoothing=value)
        loss.backward()
        return lib.clone(loss), lib.clone(leaf.grad), loss.grad_fn.name()

    return (smoothed(1.0), smoothed(-0.1), smoothed(0.3, target=(2,), logits=LOGITS[0]),
            smoothed(0.3, target=(-100, -100, -100)),
            raises(lambda: smoothed(1.5), "label_smoothing must be between 0.0 and 1.0. Got: 1.5"))


@differential
def test_nll_loss_module(lib):
    module = lib.nn.NLLLoss(weight=lib.tensor(WEIGHT), ignore_index=2)
    log_probabilities = lib.leaf(np.log(np.full((3, 3), 1 / 3)) + np.arange(9).reshape(3, 3) / 10)
    loss = module(log_probabilities, _indices(lib, [0, 2, 1]))
    loss.backward()
    summed = lib.nn.NLLLoss(reduction="sum")(log_probabilities, _indices(lib, [0, 2, 1]))
    return (repr(module), module.ignore_index, module.reduction, [name for name, _ in module.named_buffers()],
            lib.clone(loss), lib.clone(log_probabilities.grad), lib.clone(summed), loss.grad_fn.name())


@differential
def test_cross_entropy_module_with_label_smoothing(lib):
    module = lib.nn.CrossEntropyLoss(label_smoothing=0.1, reduction="sum")
    logits = lib.leaf(LOGITS)
    loss = module(logits, _indices(lib, [2, 0, 1]))
    loss.backward()
    return repr(module), module.label_smoothing, lib.clone(loss), lib.clone(logits.grad)


@pytest.mark.parametrize("function", ["nll_loss", "mse_loss"])
@differential
def test_a_loss_node_frees_what_it_saved_after_backward(lib, function):
    """torch's NllLossBackward0 saves the target and weights: a second backward raises, as through MseLossBackward0."""
    log_probabilities = lib.leaf(LOGITS)
    target = _indices(lib, [0, 2, 1]) if function == "nll_loss" else lib.tensor(np.zeros((3, 3)))
    loss = getattr(lib.nn.functional, function)(log_probabilities, target)
    loss.backward()
    return raises(loss.backward, "Trying to backward through the graph a second time")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@differential
def test_mse_loss_with_a_weight_per_element(lib, reduction):
    """torch 2.13's weighted MSE: weighted squared differences; 'mean' divides by the weights' sum. The target
    broadcasts (with torch's warning); the weight, which may require grad, must have the input's size."""
    logits, weight = lib.leaf(LOGITS), lib.leaf([WEIGHT, WEIGHT[::-1], [1.0, 1.0, 1.0]])
    with pytest.warns(UserWarning, match="Using a target size"):
        loss = lib.nn.functional.mse_loss(logits, lib.tensor([0.5, 0.0, -1.0]), reduction=reduction, weight=weight)
    _loss_and_gradient(lib, loss)
    wrong_size = raises(lambda: lib.nn.functional.mse_loss(logits, logits, weight=lib.tensor(WEIGHT)),
                        "Weights and input must have the same size.")
    bad_reduction = raises(lambda: lib.nn.functional.mse_loss(logits, logits, reduction="average", weight=weight),
                           "Invalid reduction mode: average. Expected one of 'none', 'mean', 'sum'.")
    return lib.clone(loss), lib.clone(logits.grad), lib.clone(weight.grad), wrong_size, bad_reduction
