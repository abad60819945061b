"""Chapter 11's gradient watcher, built from a module hook and tensor hooks."""
import numpy as np


def watch_gradients(model, log, max_norm):
    """Log `(name, norm of grad_output[0])` for every module with parameters of its own, and rescale each of its
    parameters' gradients to norm at most `max_norm`. Returns the handles of every hook."""
    def clip(grad):
        norm = np.linalg.norm(grad)
        return grad * (max_norm / norm) if norm > max_norm else grad

    handles = []
    for name, module in model.named_modules():
        own = list(module.parameters(recurse=False))
        if not own:
            continue

        def log_norm(module, grad_input, grad_output, name=name):
            log.append((name, round(float(np.linalg.norm(grad_output[0])), 3)))
        handles.append(module.register_full_backward_hook(log_norm))
        handles.extend(p.register_hook(clip) for p in own)
    return handles
